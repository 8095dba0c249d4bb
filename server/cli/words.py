"""The loop's next step in the CLI's words: the tools' texts name MCP tools (select_action, finish_intent, ...);
on the command line the same step is a ksearch command."""

from __future__ import annotations

import re

_SEARCH = r"\(search='(?P<s>[^']*)'\)"
_NODE = r"\(search='(?P<s>[^']*)', node_id=(?P<n>\d+)\)"

# (pattern, replacement): `{s}` is the search (from the text, else the command's), `{n}` a node id
_RULES: list[tuple[str, str]] = [
    (
        r"Read the prompt analyse_kernel "
        + _SEARCH
        + r", then call propose_intents with the first intents and "
        r"edit_tree \(op=update on the root\) with your analysis as its notes\.",
        'Add the first intents with `ksearch intent add {s} "TITLE" --why "..."`, or let a model start: '
        "`ksearch run --resume {s}`.",
    ),
    (
        # a driver run holds the search (tools.loop.run_holds_text): a person's kernel joins its refine phase
        r"add your kernel to #(?P<n>\d+)'s refine phase as one more attempt while it lasts: benchmark "
        r"\(search='(?P<s>[^']*)', node_id=\d+, candidate=\{[^}]*\}\)",
        "add your kernel to #{n}'s refine phase as one more attempt while it lasts: "
        "`ksearch submit {s} FILE --node {n}`",
    ),
    (
        r"benchmark \(search='(?P<s>[^']*)', node_id=(?P<n>\d+), candidate=\{[^}]*\}\)",
        "`ksearch submit {s} FILE --node N` measures it before your kernel (or `ksearch run --resume {s}`)",
    ),
    (r"Call finish_intent " + _NODE, "Run `ksearch finish {s} --node {n}`"),
    (
        r"finish_intent " + _NODE + r" ends its refine phase",
        "`ksearch finish {s} --node {n}` ends its refine phase",
    ),
    (r"finish_intent " + _NODE, "`ksearch finish {s} --node {n}`"),
    (r"call finish_intent early", "run `ksearch finish {s}` early"),
    (
        r"\(prompt implement_intent, node_id=(?P<n>\d+)\), then benchmark it with node_id=\d+",
        "(starting from `ksearch best {s}` or `ksearch attempt {s} N`), then submit it with "
        "`ksearch submit {s} FILE --node {n}`",
    ),
    (
        r"\(the reflect prompt finish_intent returned, or the prompt reflect_and_edit\)",
        "(`ksearch finish {s} --prompt` prints the reflect prompt a model would get)",
    ),
    (
        r"Apply any more with edit_tree and propose_intents",
        "Make any more with `ksearch intent add/edit`, `pin`, `veto`, `prune`, `reopen`",
    ),
    (
        r"apply your edits with edit_tree and propose_intents",
        "apply your changes with `ksearch intent add/edit`, `pin`, `veto`, `prune`, `reopen`",
    ),
    (r"Already applied with finish_intent", "Already applied with `ksearch finish {s} --update`"),
    (
        r"call finish_intent again, or call it without them and apply them afterwards with edit_tree",
        "run `ksearch finish {s} --update FILE` again, or finish without --update and make them afterwards with "
        "`ksearch intent edit`, `pin`, `veto`, `prune`, `reopen`",
    ),
    (
        r"call finish_intent again, or call it without them and apply them afterwards with propose_intents",
        "run `ksearch finish {s} --update FILE` again, or finish without --update and add them afterwards with "
        "`ksearch intent add`",
    ),
    (r"[Cc]all select_action " + _SEARCH, "run `ksearch select {s}`"),
    (r"[Cc]all select_action", "run `ksearch select {s}`"),
    (r"[Cc]all final_evaluation " + _SEARCH, "run `ksearch final {s}`"),
    (r"[Cc]all final_evaluation", "run `ksearch final {s}`"),
    (r"run final_evaluation \(or `ksearch final`\)", "run `ksearch final {s}`"),
    (r"a new final_evaluation", "a new `ksearch final {s}`"),
    (r"raise (?:the|its) budgets? with set_budgets", "raise it with `ksearch budget {s} --more-rounds N`"),
    (r"reopen intents with edit_tree", "reopen intents with `ksearch reopen {s} NODE`"),
    (
        r"Read the best kernel with get_tree, or take it out in its task owner's format with export_kernel "
        r"\(search='[^']*', format='(?P<f>\w+)'\)",
        "Read the best kernel with `ksearch best {s}`, or write it out in its task owner's format with "
        "`ksearch export {s} --{f}`",
    ),
    (r"Read the best kernel with get_tree", "Read the best kernel with `ksearch best {s}`"),
    (
        r"export_kernel \(search='(?P<s>[^']*)', format='(?P<f>\w+)', attempt=(?P<n>\d+)\)",
        "`ksearch export {s} --{f} --attempt {n}`",
    ),
    (r"export_kernel \(search='(?P<s>[^']*)', format='(?P<f>\w+)'\)", "`ksearch export {s} --{f}`"),
    (r"get_tree shows the tree", "`ksearch tree {s}` shows the tree"),
    (r"edit_tree op=reopen / unveto first", "`ksearch reopen` / `ksearch unveto` first"),
]
_COMPILED = [(re.compile(p), r) for p, r in _RULES]
TOOL_NAMES = (
    "select_action",
    "finish_intent",
    "final_evaluation",
    "set_budgets",
    "edit_tree",
    "propose_intents",
    "get_tree",
    "export_kernel",
    "analyse_kernel",
    "implement_intent",
    "reflect_and_edit",
)


def cli_words(text: str, search: str | None = None) -> str:
    """`text` with each tool call it advises said as the ksearch command that does the same."""
    # a refusal names its search once; every command it advises is run on that search
    named = re.search(r"search='([^']*)'", text)
    if search is None and named is not None:
        search = named.group(1)
    out = text
    for pattern, repl in _COMPILED:

        def sub(m: re.Match[str], repl: str = repl) -> str:
            groups = m.groupdict()
            said = repl.format(
                **{**groups, "s": groups.get("s") or search or "SEARCH", "n": groups.get("n") or "N"}
            )
            # a sentence that began with the tool's advice begins with the command's
            return said[:1].upper() + said[1:] if m.group(0)[:1].isupper() else said

        out = pattern.sub(sub, out)
    return out
