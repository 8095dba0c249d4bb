"""What the tree already holds, as the offline tuner reads it from its update context.

The context names the open intents with their params and the attempts with theirs; closed, failed and pruned
intents appear only in the rendered tree view (ksearch.worldmodel.render.render_tree: one line per node,
`#id [status] p<priority> d<difficulty> <flags> title`, indented by depth). The tuner's titles name the
setting they move to (from a base attempt, or from the seed), so they are built here and read back here: a
node the tuner proposed earlier is recognised under its parent whatever its status, and the same setting is
not proposed there again (the world model would refuse it as a near-duplicate). What the world model still
refuses in an update (a node the view left out) is remembered here too (`Refused`), so a retry drops just
those items.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ksearch.server.driver.policies.base import UpdateResult

Config = dict[str, Any]

_COMBINE = "combine the best measured values: "


def fmt_cfg(cfg: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in cfg.items())


def where_of(attempt_id: int | None) -> str:
    return f"attempt {attempt_id}" if attempt_id else "the best so far"


def init_title(name: str, value: Any, seed_value: Any) -> str:
    return f"set {name} = {value!r} (seed: {seed_value!r})"


def move_title(name: str, old: Any, new: Any, base_attempt_id: int | None) -> str:
    return f"{name} {old!r} -> {new!r} (on {where_of(base_attempt_id)})"


def combine_title(moved: Mapping[str, Any], base_attempt_id: int | None) -> str:
    return f"{_COMBINE}{fmt_cfg(moved)} (on {where_of(base_attempt_id)})"


def same_title(title: str) -> str:
    """The form two titles are compared in: the tree view shows a title on one line, case aside."""
    return " ".join(title.split()).casefold()


# ---------------------------------------------------------------------- titles read back

_NAME = r"[A-Za-z_]\w*"
_ON = r" \(on (?:attempt (?P<aid>\d+)|the best so far)\)$"
_INIT_RE = re.compile(rf"^set (?P<name>{_NAME}) = (?P<new>.+) \(seed: (?P<old>.+)\)$")
_MOVE_RE = re.compile(rf"^(?P<name>{_NAME}) (?P<old>.+?) -> (?P<new>.+?){_ON}")
_COMBINE_RE = re.compile(rf"^{re.escape(_COMBINE)}(?P<moved>.+?){_ON}")
_PAIR_RE = re.compile(rf"({_NAME})=(.+?)(?=, {_NAME}=|$)")

SEED = "seed"


@dataclass(frozen=True)
class TitleMove:
    """A tuner title read back: the values it sets, over which base (an attempt id, or SEED)."""

    base: int | str
    moved: Config
    old: Config  # the base's values the title states (init and one-parameter moves), to check the base


def _value(text: str, allowed: list[Any]) -> tuple[bool, Any]:
    """The allowed value whose repr `text` is; (False, None) when it is none of them."""
    try:
        got = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError):
        return False, None
    for v in allowed:
        if repr(v) == repr(got):
            return True, v
    return False, None


def read_title(title: str, space: Mapping[str, list[Any]]) -> TitleMove | None:
    """The setting one of the tuner's own titles names, relative to its base; None for any other title, a
    base the title does not name ("the best so far"), or a value outside the declared space."""
    text = " ".join(title.split())
    pairs: list[tuple[str, str]]
    olds: list[tuple[str, str]] = []
    base: int | str | None
    if m := _INIT_RE.match(text):
        pairs, olds, base = [(m["name"], m["new"])], [(m["name"], m["old"])], SEED
    elif m := _MOVE_RE.match(text):
        pairs, olds = [(m["name"], m["new"])], [(m["name"], m["old"])]
        base = int(m["aid"]) if m["aid"] else None
    elif m := _COMBINE_RE.match(text):
        pairs = _PAIR_RE.findall(m["moved"])
        if ", ".join(f"{k}={v}" for k, v in pairs) != m["moved"]:
            return None
        base = int(m["aid"]) if m["aid"] else None
    else:
        return None
    if base is None or not pairs:
        return None
    moved: Config = {}
    old: Config = {}
    for into, items in ((moved, pairs), (old, olds)):
        for name, shown in items:
            ok, v = _value(shown, list(space.get(name, [])))
            if not ok:
                return None
            into[name] = v
    return TitleMove(base=base, moved=moved, old=old)


def setting_of(move: TitleMove, bases: Mapping[int, Config], seed: Config | None) -> Config | None:
    """The whole setting a title names, given its base's values; None when the base is not known or does
    not have the values the title says it had."""
    base = seed if move.base == SEED else bases.get(move.base) if isinstance(move.base, int) else None
    if base is None or any(repr(base.get(k)) != repr(v) for k, v in move.old.items()):
        return None
    return {**base, **move.moved}


# ---------------------------------------------------------------------- the tree view's nodes

_HEAD_RE = re.compile(
    r"^(?P<pad>(?:  )*)#(?P<id>\d+) (?:root: .*|\[(?P<status>open|active|closed|failed|pruned)\] "
    r"p\d+\.\d+ d\d+ (?P<rest>.*))$"
)
_FLAGS_RE = re.compile(
    r"^(?:best (?:\d+\.\d+x|correct \(CPU interpreter: not timed\)) )?(?:exp \d+\.\d+x )?(?:tries \d+ )?"
    r"(?:PINNED )?(?:VETOED )?(?:<-BEST )?"
)
_SUFFIX_RE = re.compile(r"(?: \(notes elided: \d+ chars\))?(?: \[\+\d+ hidden\])?$")


@dataclass(frozen=True)
class ShownNode:
    id: int
    parent_id: int | None  # None: the root
    status: str  # "root" for the root
    title: str


def shown_nodes(tree_view: str) -> list[ShownNode]:
    """The nodes a tree view shows, each with its parent (read from the indentation). A line is a node only
    where its depth follows the node lines before it (one level deeper at most): the indented lines of
    rationale and notes never are, even when their text looks like a node line."""
    out: list[ShownNode] = []
    path: list[int] = []  # the ids of the last node line at each depth
    for line in tree_view.splitlines():
        m = _HEAD_RE.match(line)
        if m is None:
            continue
        depth = len(m["pad"]) // 2
        if depth > len(path) or (depth == 0) != (m["status"] is None):
            continue
        del path[depth:]
        nid = int(m["id"])
        if m["status"] is None:
            out.append(ShownNode(id=nid, parent_id=None, status="root", title=""))
        else:
            rest = _SUFFIX_RE.sub("", _FLAGS_RE.sub("", m["rest"], count=1), count=1)
            out.append(ShownNode(id=nid, parent_id=path[-1], status=m["status"], title=rest))
        path.append(nid)
    return out


@dataclass
class Held:
    """What the tree holds under one parent: its children's titles (as `same_title` writes them) and the
    settings those titles name, where known."""

    titles: set[str] = field(default_factory=set)
    settings: list[Config] = field(default_factory=list)


def held_under(
    tree_view: str,
    parent_id: int | None,
    space: Mapping[str, list[Any]],
    bases: Mapping[int, Config],
    seed: Config | None,
) -> Held:
    """The children the tree view shows under `parent_id` (None: the root), whatever their status."""
    nodes = shown_nodes(tree_view)
    if parent_id is None:
        parent_id = next((n.id for n in nodes if n.parent_id is None), None)
    held = Held()
    for n in nodes:
        if parent_id is None or n.parent_id != parent_id:
            continue
        held.titles.add(same_title(n.title))
        move = read_title(n.title, space)
        cfg = setting_of(move, bases, seed) if move is not None else None
        if cfg is not None:
            held.settings.append(cfg)
    return held


def root_id(tree_view: str) -> int | None:
    return next((n.id for n in shown_nodes(tree_view) if n.parent_id is None), None)


REFUSALS_KEPT = 16  # updates whose refusals are remembered (the driver retries one update a few times)
_ITEM_RE = re.compile(r"^item (\d+)(?: \(node #(\d+)\))?")


@dataclass
class Refused:
    """The items of one update's answers the world model refused: new intents by title, edits by node."""

    titles: set[str] = field(default_factory=set)
    nodes: set[int] = field(default_factory=set)
    unplaced: list[str] = field(default_factory=list)

    def learn(self, problems: list[str], previous: UpdateResult) -> None:
        """Place each problem ("item N [(node #X)] field ...: ...", ksearch.worldmodel.errors.EditProblem) on
        the item of `previous` it names: an edit's problem names its node, an intent's does not."""
        for problem in problems:
            m = _ITEM_RE.match(problem)
            quoted = [i.title for i in previous.new_intents if f"title {i.title!r}" in problem]
            if m is not None and m[2] is not None:
                self.nodes.add(int(m[2]))
            elif quoted:
                self.titles.add(quoted[0])
            elif m is not None and int(m[1]) < len(previous.new_intents):
                self.titles.add(previous.new_intents[int(m[1])].title)
            elif problem not in self.unplaced:
                self.unplaced.append(problem)

    def apply(self, answer: UpdateResult) -> UpdateResult:
        """The answer without the refused items, and a reflection that says which went."""
        intents = [i for i in answer.new_intents if i.title not in self.titles]
        edits = [e for e in answer.edits if e.node_id not in self.nodes]
        dropped = [f"intent {t!r}" for t in sorted(self.titles)] + [
            f"edits of #{n}" for n in sorted(self.nodes)
        ]
        note = f" Left out after the world model refused them: {', '.join(dropped)}." if dropped else ""
        if self.unplaced:
            note += f" Refusals not tied to one item: {'; '.join(self.unplaced)[:300]}."
        return UpdateResult(reflection=answer.reflection + note, new_intents=intents, edits=edits)
