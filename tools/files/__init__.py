"""Candidates as files outside any search: a candidate file, its compile and evaluation, FlashInfer-Bench Solutions, declared tunables.
May import the loop's protocols and the tools' foundations."""
