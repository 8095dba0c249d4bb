"""Tool errors: answers a model can act on (what was wrong, what is accepted), never a traceback."""

from __future__ import annotations

from pydantic import ValidationError

from ksearch.worldmodel.errors import KsearchError

UNPARSED = (
    "the candidate source does not parse as Python"  # how a source that is not Python is refused or recorded
)


class ToolFailure(KsearchError):
    """A tool refused its input or could not do its work. `str(e)` is the whole user-facing message."""

    def __init__(self, message: str, *, problems: list[str] | None = None) -> None:
        self.problems = problems or []
        text = message if not self.problems else message + "\n" + "\n".join(f"- {p}" for p in self.problems)
        super().__init__(text)


def describe_validation(err: ValidationError, what: str) -> ToolFailure:
    """Turn a pydantic error into one line per bad field, naming the field and the accepted values."""
    problems = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or what
        # a validator's own ValueError already says what was wrong: pydantic's "Value error, " adds nothing
        msg = e["msg"].removeprefix("Value error, ") if e["type"] == "value_error" else e["msg"]
        problems.append(f"{loc}: {msg} (got {e.get('input')!r:.80})")
    return ToolFailure(f"invalid {what}", problems=problems)
