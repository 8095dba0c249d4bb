"""The offline tuner: a policy with no language model, so a search runs on a machine without a key.

Its space is the `TUNABLES` the seed declares. `init` proposes one-at-a-time moves from the seed's
values; `write_code` sets those values in the base source; `update` fits a small additive model of each
(parameter, value)'s effect on the log-speedup to everything measured so far, re-prioritises and prunes
the open moves by it, and proposes coordinate moves around the best setting plus the combination of the
best values (the model and its observations: tuner_model.py). Everything is deterministic for a given seed
and history.

A proposal never repeats a setting the tree already holds under the same parent, whatever that node's status
(tuner_tree.py reads the tree view), and when the world model refuses part of an update anyway (a node the
view left out), the retry drops the refused items and keeps the rest.
"""

from __future__ import annotations

import math
from typing import Any

from ksearch.server.driver.policies.base import (
    CodeResult,
    InitContext,
    InitResult,
    IntentDeclined,
    Policy,
    PolicyError,
    UpdateContext,
    UpdateResult,
    WriteContext,
)
from ksearch.server.driver.policies.tuner_model import (
    EffectModel,
    Feature,
    Observation,
    config_key,
    ordered,
    prior,
)
from ksearch.server.driver.policies.tuner_tree import (
    REFUSALS_KEPT,
    Config,
    Held,
    Refused,
    combine_title,
    fmt_cfg,
    held_under,
    init_title,
    move_title,
    root_id,
    same_title,
)
from ksearch.tools.files.tunables import TunableError, read_tunables, set_tunables
from ksearch.worldmodel.models import INCONCLUSIVE_STATUSES, EditSpec, IntentSpec


class TunerPolicy(Policy):
    name = "tuner"
    model = "tuner"

    def __init__(
        self,
        seed: int = 0,
        *,
        max_intents: int = 12,
        max_new_intents: int = 6,
        prune_below: float = 0.85,
    ) -> None:
        super().__init__()
        self.seed = seed
        self.max_intents = max_intents
        self.max_new_intents = max_new_intents
        self.prune_below = prune_below  # prune a move predicted (from measured effects) below this x the best
        self._space: dict[str, list[Any]] = {}
        # (round, intent id) -> what the world model refused of that update's answers so far
        self._refused: dict[tuple[int, int], Refused] = {}

    # ------------------------------------------------------------------ init

    async def init(self, ctx: InitContext) -> InitResult:
        if not ctx.seed_source.strip():
            raise PolicyError(
                f"the offline tuner only tunes an existing kernel, and task {ctx.task.name!r} has no seed "
                "candidate and the search no correct kernel to start from: it needs a language model to write "
                "the first kernel. Use --policy anthropic (ANTHROPIC_API_KEY) or --policy openai --base-url URL, "
                "or start from a correct kernel of your own that declares TUNABLES (`ksearch run TASK --start "
                "FILE`, `ksearch suite run --starts DIR`, or `ksearch submit` on the root)"
            )
        try:
            declared = read_tunables(ctx.seed_source)
        except TunableError as e:
            raise PolicyError(f"the offline tuner cannot read the seed's tunables: {e}") from e
        if not declared.tunables:
            raise PolicyError(
                "the offline tuner needs a seed that declares its tunables, e.g. "
                'TUNABLES = {"BLOCK": [256, 512, 1024]} with a line BLOCK = 512; this seed declares none. '
                "Use an LLM policy (anthropic, openai) for this task."
            )
        space = declared.space()
        seed_cfg = declared.current()
        self._space = space
        bound = ctx.task.bound
        moves: dict[str, list[tuple[float, Any]]] = {}
        for name, allowed in space.items():
            opts = [(prior(name, seed_cfg[name], v, allowed, bound), v) for v in ordered(allowed)]
            opts = [o for o in opts if o[1] != seed_cfg[name]]
            moves[name] = sorted(opts, key=lambda o: -o[0])  # stable: ties keep the natural order
        # Interleave the parameters' best moves so every parameter's effect gets measured early.
        params = sorted((n for n in moves if moves[n]), key=lambda n: (-moves[n][0][0], list(space).index(n)))
        picks: list[tuple[float, str, Any]] = []
        for rank in range(max((len(m) for m in moves.values()), default=0)):
            picks += [(moves[n][rank][0], n, moves[n][rank][1]) for n in params if rank < len(moves[n])]
        picks = picks[: self.max_intents]
        intents = [
            IntentSpec(
                title=init_title(n, v, seed_cfg[n]),
                rationale=(
                    f"One-at-a-time move in the declared space: measures the effect of {n} with every other "
                    "tunable at the seed's value."
                ),
                priority=p,
                difficulty=1,
                params={**seed_cfg, n: v},
                notes="tuner prior: near moves first"
                + (
                    "; larger tiles/warps/stages first (compute-bound)"
                    if bound in ("compute", "mixed")
                    else ""
                ),
            )
            for p, n, v in picks
        ]
        intents = self._bank_intents(ctx, space, seed_cfg) + intents
        size = math.prod(len(ordered(a)) for a in space.values())
        lines = "\n".join(
            f"- {n}: " + ", ".join(f"[{v!r}]" if v == seed_cfg[n] else repr(v) for v in ordered(a))
            for n, a in space.items()
        )
        analysis = (
            "Offline tuner (no language model): this search explores the tunables the seed declares; the "
            f"seed's values are in brackets.\nTask {ctx.task.name}: {ctx.task.op or 'op unspecified'}, "
            f"{ctx.task.dtype or 'dtype unspecified'}, {bound}-bound.\n"
            f"Space: {len(space)} parameters, {size} settings in all.\n{lines}\n"
            f"Plan: {len(intents)} one-at-a-time moves from the seed first. After each round a model of each "
            "(parameter, value)'s effect on the measured log-speedup re-prioritises the open moves, prunes "
            "those predicted clearly worse, and adds moves around the best setting and the combination of "
            "the best values."
        )
        return InitResult(analysis=analysis, intents=intents)

    @staticmethod
    def _bank_intents(ctx: InitContext, space: dict[str, list[Any]], seed_cfg: Config) -> list[IntentSpec]:
        """The settings that won on the nearest related tasks (the kernel bank), restricted to this seed's declared
        space, as the first moves: a head start, measured here before it counts."""
        out: list[IntentSpec] = []
        seen: list[Config] = []
        for b in ctx.bank_settings:
            moved = {
                k: v
                for k, v in b.params.items()
                if k in space and any(repr(v) == repr(a) for a in space[k]) and repr(v) != repr(seed_cfg[k])
            }
            if not moved or moved in seen:
                continue
            seen.append(moved)
            won = (
                f"{b.speedup_vs_eager:.3g}x vs eager there" if b.speedup_vs_eager else "a measured gain there"
            )
            out.append(
                IntentSpec(
                    title=f"start from the setting that won on {b.task} (bank {b.uid}): {fmt_cfg(moved)}",
                    rationale=(
                        f"The kernel bank's most related task ({b.task}, similarity {b.similarity:.2f}) won with "
                        f"these values ({won}); measured here before it counts."
                    ),
                    priority=0.97,
                    difficulty=1,
                    params={**seed_cfg, **moved},
                    notes=f"from bank entry {b.uid}",
                )
            )
            if len(out) == 2:
                break
        return out

    # ------------------------------------------------------------------ write_code

    async def write_code(self, ctx: WriteContext) -> CodeResult:
        if not ctx.intent_params:
            raise IntentDeclined(
                f"the offline tuner implements only intents that set tunable values (params); "
                f"intent #{ctx.intent_id} '{ctx.intent_title}' sets none. It needs an LLM policy or a human."
            )
        try:
            declared = read_tunables(ctx.base_source)
        except TunableError as e:
            raise IntentDeclined(
                f"intent #{ctx.intent_id}: the base code's tunables cannot be read: {e}"
            ) from e
        space = declared.space()
        base = declared.current()
        absent = [k for k in ctx.intent_params if k not in base]
        if absent:
            raise IntentDeclined(
                f"intent #{ctx.intent_id} sets {', '.join(absent)}, which the base code does not declare in "
                f"TUNABLES (declared: {', '.join(base) or 'none'})"
            )
        target = base | dict(ctx.intent_params)
        changed = [k for k, v in ctx.intent_params.items() if base[k] != v]
        notes = [f"{k} {base[k]!r} -> {ctx.intent_params[k]!r}" for k in changed]
        if ctx.attempt_index > 0:
            move = self._refine_move(ctx.attempt_index, target, changed, space, base)
            if move is None:
                raise IntentDeclined(
                    f"intent #{ctx.intent_id}: the one-parameter moves around {fmt_cfg(target)} are used up "
                    f"at refine attempt {ctx.attempt_index}; nothing new is left to try for this intent"
                )
            name, new = move
            notes.append(f"refine attempt {ctx.attempt_index}: also {name} {target[name]!r} -> {new!r}")
            target[name] = new
        writes = {k: v for k, v in target.items() if base.get(k) != v}
        if not writes:
            raise IntentDeclined(
                f"intent #{ctx.intent_id}: the base code already has these settings ({fmt_cfg(target)}); "
                "there is nothing new to measure"
            )
        try:
            written = set_tunables(ctx.base_source, writes)
        except TunableError as e:
            raise IntentDeclined(f"intent #{ctx.intent_id}: {e}") from e
        return CodeResult(
            source=written.source,
            language=ctx.task.language,
            explanation="tuner: " + "; ".join(notes),
            params=written.current(),
        )

    def _refine_move(
        self,
        attempt_index: int,
        target: Config,
        changed: list[str],
        space: dict[str, list[Any]],
        base: Config,
    ) -> tuple[str, Any] | None:
        """The attempt_index-th move (1-based) in a fixed sequence of one-parameter moves from `target`: first
        the parameters the intent leaves alone (one step up for each, one step down, two up, ...; the seed
        rotates which comes first), then further steps of the intent's own parameters. A move back to the
        base's value is skipped: that setting is the base itself."""
        others = [n for n in space if n not in changed and target.get(n) in ordered(space[n])]
        own = [n for n in changed if target.get(n) in ordered(space.get(n, []))]
        if others:
            shift = self.seed % len(others)
            others = others[shift:] + others[:shift]
        seq: list[tuple[str, Any]] = []
        for group in (others, own):
            longest = max((len(space[n]) for n in group), default=0)
            for step in range(1, longest):
                for direction in (1, -1):
                    for n in group:
                        order = ordered(space[n])
                        j = order.index(target[n]) + direction * step
                        if 0 <= j < len(order) and not (n in changed and order[j] == base.get(n)):
                            seq.append((n, order[j]))
        return seq[attempt_index - 1] if attempt_index <= len(seq) else None

    # ------------------------------------------------------------------ update

    async def update(self, ctx: UpdateContext) -> UpdateResult:
        answer = self._answer(ctx)
        key = (ctx.round, ctx.intent_id)
        if not ctx.rejected:  # a first answer for this intent's update
            self._refused.pop(key, None)
            return answer
        # Asked again: the world model refused the previous answer. It was this same answer less what earlier
        # refusals dropped (the answer is deterministic and the context the same), so the problems' item
        # numbers point into it. The driver passes only the latest refusal: drops accumulate per update.
        refused = self._refused.pop(key, None) or Refused()
        refused.learn(ctx.rejected, refused.apply(answer))
        self._refused[key] = refused
        while len(self._refused) > REFUSALS_KEPT:
            del self._refused[next(iter(self._refused))]
        return refused.apply(answer)

    def _answer(self, ctx: UpdateContext) -> UpdateResult:
        space = dict(ctx.tunables) or self._space or self._infer_space(ctx)
        obs = self._observations(ctx, space)
        ok = [o for o in obs if o.log_speedup is not None]
        bad = self._blamed(obs)
        edits: list[EditSpec] = []
        reflection = [
            f"tuner, round {ctx.round}: {len(ctx.outcomes)} attempt(s) on #{ctx.intent_id}; "
            f"{sum(o.correct for o in obs)} of {len(obs)} measured settings ran correctly"
            + (f" ({len(ok)} of them timed on a GPU)." if len(ok) != sum(o.correct for o in obs) else ".")
        ]
        if bad:
            reflection.append("Values that only ever failed: " + ", ".join(f"{k}={v}" for k, v in bad) + ".")
        if not ok:
            reflection.append(
                "No setting timed on a GPU yet (the CPU interpreter's times rank nothing): nothing to fit."
                if any(o.correct for o in obs)
                else "No correct measurement yet: nothing to fit, and no failure can be blamed on a value."
            )
            return UpdateResult(reflection=" ".join(reflection))

        model = EffectModel([(o.cfg, o.log_speedup) for o in ok if o.log_speedup is not None], space)
        best = max(ok, key=lambda o: (o.log_speedup, -(o.outcome.attempt_id or 0)))
        best_y = best.log_speedup
        assert best_y is not None
        reflection.append(f"Best: {math.exp(best_y):.3f}x vs eager with {fmt_cfg(best.cfg)}.")
        ranked = sorted(
            ((model.effect(k, v), k, v) for k, vs in space.items() for v in ordered(vs)),
            key=lambda t: -(t[0] or 0.0),
        )
        known = [f"{k}={v!r} {e:+.3f}" for e, k, v in ranked if e is not None]
        reflection.append("Fitted effects on log-speedup: " + ", ".join(known) + ".")

        open_keys: set[tuple[Feature, ...]] = set()
        pruned = updated = 0
        by_attempt = {o.outcome.attempt_id: o for o in ok if o.outcome.attempt_id is not None}
        for i in self._open_with_params(ctx):
            cfg = best.cfg | {k: v for k, v in i["params"].items() if k in space}
            open_keys.add(config_key(cfg))
            k_bad, v_bad = self._first_bad(cfg, bad)
            pred = model.predict(cfg)
            if k_bad is not None:
                edits.append(
                    EditSpec(
                        op="prune",
                        node_id=int(i["id"]),
                        reason=f"sets {k_bad}={v_bad}, which only ever failed",
                    )
                )
                pruned += 1
                continue
            if model.knows(cfg) and pred - best_y < math.log(self.prune_below):
                edits.append(
                    EditSpec(
                        op="prune",
                        node_id=int(i["id"]),
                        reason=f"predicted {math.exp(pred - best_y):.2f}x of the best from measured effects",
                    )
                )
                pruned += 1
                continue
            pri = self._priority(pred, best_y, model.knows(cfg))
            if abs(pri - float(i.get("priority", 0.5))) >= 0.02:
                edits.append(
                    EditSpec(
                        op="update",
                        node_id=int(i["id"]),
                        priority=pri,
                        expected_speedup=self._over_base(
                            i, space, model, by_attempt.get(i.get("base_attempt_id") or 0), best
                        ),
                        reason=f"effect model: predicted {math.exp(pred):.3f}x vs eager (best {math.exp(best_y):.3f}x)",
                    )
                )
                updated += 1

        held = self._held(ctx, space, obs, best)
        under = f"#{best.outcome.node_id}" if best.outcome.node_id is not None else "the root"
        new, skipped = self._new_intents(
            space, model, best, best_y, bad, {config_key(o.cfg) for o in obs} | open_keys, held
        )
        reflection.append(
            f"Re-prioritised {updated}, pruned {pruned}, proposed {len(new)} new setting(s)"
            + (f" ({skipped} left out: the tree holds them under {under} already)" if skipped else "")
            + "."
        )
        return UpdateResult(reflection=" ".join(reflection), new_intents=new, edits=edits)

    def _new_intents(
        self,
        space: dict[str, list[Any]],
        model: EffectModel,
        best: Observation,
        best_y: float,
        bad: list[Feature],
        taken: set[tuple[Feature, ...]],
        held: Held,
    ) -> tuple[list[IntentSpec], int]:
        """The new intents, best first, and how many were left out because the tree holds their setting (or
        their title) under the same parent already, whatever that node's status."""
        proposals: list[tuple[Config, str, str]] = []
        held_keys = {config_key(cfg) for cfg in held.settings}
        skipped = 0
        combo = dict(best.cfg)
        for n in space:
            scored = [(eff, v) for v in ordered(space[n]) if (eff := model.effect(n, v)) is not None]
            if scored:
                combo[n] = max(scored, key=lambda t: t[0])[1]
        where = best.outcome.attempt_id
        if combo != best.cfg:
            moved = {k: v for k, v in combo.items() if best.cfg.get(k) != v}
            proposals.append(
                (
                    combo,
                    combine_title(moved, where),
                    "each value was the best measured for its parameter",
                )
            )
        for n, allowed in space.items():
            order = ordered(allowed)
            if best.cfg.get(n) not in order:
                continue
            j = order.index(best.cfg[n])
            for k in (j + 1, j - 1):
                if 0 <= k < len(order):
                    proposals.append(
                        (
                            best.cfg | {n: order[k]},
                            move_title(n, best.cfg[n], order[k], where),
                            "coordinate move around the best measured setting",
                        )
                    )
        scored_props: list[tuple[float, str, IntentSpec]] = []
        for cfg, title, why in proposals:
            key = config_key(cfg)
            if key in taken or self._first_bad(cfg, bad)[0] is not None:
                continue
            if key in held_keys or same_title(title[:200]) in held.titles:
                skipped += 1
                continue
            taken.add(key)
            pred = model.predict(cfg)
            knows = model.knows(cfg)
            if knows and pred - best_y < math.log(self.prune_below):
                continue
            pri = self._priority(pred, best_y, knows)
            spec = IntentSpec(
                title=title[:200],
                rationale=f"{why}; the effect model predicts {math.exp(pred):.3f}x vs eager"
                + ("" if knows else " (some values not measured yet)"),
                priority=pri,
                difficulty=1,
                expected_speedup=round(math.exp(pred - best_y), 4) if knows else None,
                params=cfg,
                parent_id=best.outcome.node_id,
                base_attempt_id=best.outcome.attempt_id,
            )
            scored_props.append((pri, title, spec))
        scored_props.sort(key=lambda t: (-t[0], t[1]))
        return [s for _, _, s in scored_props[: self.max_new_intents]], skipped

    @staticmethod
    def _held(
        ctx: UpdateContext, space: dict[str, list[Any]], obs: list[Observation], best: Observation
    ) -> Held:
        """What the tree holds under the parent new intents go to (the best's node): the tree view's
        children there, with the settings their titles name over the measured bases (the seed: the first
        attempt on the root)."""
        bases = {o.outcome.attempt_id: o.cfg for o in obs if o.outcome.attempt_id is not None}
        root = root_id(ctx.tree_view)
        on_root = [o for o in obs if o.outcome.node_id == root and o.outcome.attempt_id is not None]
        seed = min(on_root, key=lambda o: o.outcome.attempt_id or 0).cfg if on_root else None
        return held_under(ctx.tree_view, best.outcome.node_id, space, bases, seed)

    @staticmethod
    def _blamed(obs: list[Observation]) -> list[Feature]:
        """Values that explain a failure on their own: the one value of a failed setting that no correct
        setting ever had. A failed setting with several such values blames none of them (ambiguous), and
        without any correct setting nothing is blamed."""
        # a value that ran correctly anywhere (a GPU, or the CPU interpreter) cannot explain a failure
        good = {(k, repr(v)) for o in obs if o.correct for k, v in o.cfg.items()}
        if not good:
            return []
        bad: set[Feature] = set()
        for o in obs:
            if not o.correct and not o.inconclusive:
                unseen = {(k, repr(v)) for k, v in o.cfg.items()} - good
                if len(unseen) == 1:
                    bad |= unseen
        return sorted(bad)

    @staticmethod
    def _priority(pred: float, best_y: float, knows: bool) -> float:
        # +10% predicted over the best -> ~0.74; unmeasured values get an exploration bonus.
        p = 0.5 + 2.5 * (pred - best_y) + (0.0 if knows else 0.1)
        return round(min(0.95, max(0.05, p)), 4)

    @staticmethod
    def _first_bad(cfg: Config, bad: list[Feature]) -> tuple[str | None, str | None]:
        for k, v in cfg.items():
            if (k, repr(v)) in bad:
                return k, repr(v)
        return None, None

    @staticmethod
    def _over_base(
        intent: dict[str, Any],
        space: dict[str, list[Any]],
        model: EffectModel,
        base: Observation | None,
        best: Observation,
    ) -> float | None:
        """The intent's expected_speedup as ksearch.worldmodel.models.EXPECTED_SPEEDUP defines it: relative to the
        code it builds on, its base attempt (which the best may have overtaken since), else the best; None
        where the model has not measured every value."""
        ref = base if base is not None and base.log_speedup is not None else best
        cfg = ref.cfg | {k: v for k, v in intent["params"].items() if k in space}
        if not model.knows(cfg) or ref.log_speedup is None:
            return None
        return round(math.exp(model.predict(cfg) - ref.log_speedup), 4)

    @staticmethod
    def _open_with_params(ctx: UpdateContext) -> list[dict[str, Any]]:
        return [i for i in ctx.open_intents if i.get("params") and i.get("id") is not None]

    @staticmethod
    def _observations(ctx: UpdateContext, space: dict[str, list[Any]]) -> list[Observation]:
        """Each attempt once (history and this round may overlap), with its settings: its own params, or the
        intent's when the driver did not pass them."""
        seen: set[int] = set()
        out: list[Observation] = []
        for o in [*ctx.history, *ctx.outcomes]:
            if o.attempt_id is not None:
                if o.attempt_id in seen:
                    continue
                seen.add(o.attempt_id)
            params = o.params or (ctx.intent_params if o.node_id == ctx.intent_id else {})
            cfg = {k: v for k, v in params.items() if k in space}
            if not cfg:
                continue
            ok = o.status == "ok" and o.speedup_vs_eager is not None and o.speedup_vs_eager > 0
            out.append(
                Observation(
                    cfg,
                    math.log(o.speedup_vs_eager) if ok else None,  # type: ignore[arg-type]
                    o,
                    inconclusive=o.status in INCONCLUSIVE_STATUSES,
                )
            )
        return out

    @staticmethod
    def _infer_space(ctx: UpdateContext) -> dict[str, list[Any]]:
        """Without declared tunables (e.g. after a resume with an old driver), the values seen so far."""
        space: dict[str, list[Any]] = {}
        sources = [o.params for o in [*ctx.history, *ctx.outcomes]] + [
            i.get("params") or {} for i in ctx.open_intents
        ]
        for params in [*sources, ctx.intent_params]:
            for k, v in params.items():
                if v not in space.setdefault(k, []):
                    space[k].append(v)
        return space
