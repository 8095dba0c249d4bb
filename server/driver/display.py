"""What the driver shows while it runs: a live panel in a terminal, plain lines otherwise."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from worldmodel.models import Attempt, Evaluation, Node, Search

if TYPE_CHECKING:
    from server.driver.loop import DriverResult
    from server.driver.policies.base import Policy


def _speed(x: float | None) -> str:
    return f"{x:.3f}x" if x is not None else "-"


def _on(device: str | None) -> str:
    return f" [{device}]" if device else ""


class Display:
    """Plain lines: one per event. Used in logs, CI and with --plain."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False)
        self.best: float | None = None
        self.round_no = 0
        self.intent = ""
        self.n_attempts = 0
        self.events: list[str] = []

    def _line(self, text: str) -> None:
        self.console.print(text, markup=False)

    def start(self, s: Search, policy: Policy) -> None:
        what = f"policy: {policy.name}" + (
            f" ({policy.model})" if policy.model and policy.model != policy.name else ""
        )
        if policy.name == "tuner":
            what += (
                " — offline tuner, no language model (set ANTHROPIC_API_KEY or --policy openai for an LLM)"
            )
        self._line(f"search {s.id} '{s.name}' on task {s.task}; {what}")

    def round(self, round_no: int, node: Node, reason: str) -> None:
        self.round_no, self.intent = round_no, f"#{node.id} {node.title}"
        self._line(f"round {round_no}: intent {self.intent} — {reason}")

    def attempt(self, node: Node, att: Attempt | None, ev: Evaluation | None = None) -> None:
        ev = ev or (att.evaluation if att else None)
        self.n_attempts += 1
        sp = att.speedup if att is not None else None
        if sp is not None and (self.best is None or sp > self.best):
            self.best = sp
        status = ev.status if ev else "?"
        detail = f" ({ev.error[:120]})" if ev and ev.error else ""
        device = ev.timings[0].device if ev and ev.timings else ""
        self._line(
            f"  attempt {att.id if att else '-'} on #{node.id}: {status}{detail}, {_speed(sp)} vs eager"
            + (f" [{device}]" if device else "")
            + f"; best so far {_speed(self.best)}"
        )

    def event(self, text: str) -> None:
        self.events.append(text)
        self._line(f"  · {text}")

    def finish(self, res: DriverResult) -> None:
        unpriced = f" (+{res.unpriced_calls} calls to unpriced models)" if res.unpriced_calls else ""
        self._line(
            f"stopped: {res.stop_reason}. {res.rounds_run} rounds, {res.attempts} attempts, "
            f"best attempt {res.best_attempt_id} at {_speed(res.best_speedup_vs_eager)} vs eager"
            f"{_on(res.device)}; {res.tokens} tokens, ${res.usd:.2f}{unpriced}, {res.wall_s:.0f}s"
        )
        for r in res.final:
            self._line(
                f"final: attempt {r.attempt_id}: {r.status}, {_speed(r.speedup_vs_eager)} vs eager, "
                f"{_speed(r.speedup_vs_compile)} vs torch.compile on {', '.join(r.workloads)}{_on(r.device)}"
            )
        if res.device == "cpu-interpreter":
            self._line(
                "note: timed in the Triton interpreter on the CPU: a functional check of the pipeline, "
                "not a GPU speed; run on a GPU machine for real numbers"
            )


class LiveDisplay(Display):
    """A live panel (round, intent, attempt, status, best, tokens/cost) above a scrolling event log."""

    def __init__(self, console: Console | None = None) -> None:
        super().__init__(console)
        self._live: Live | None = None
        self._header: dict[str, Any] = {}

    def _render(self) -> Group:
        t = Table.grid(padding=(0, 2))
        for k, v in self._header.items():
            t.add_row(Text(k, style="bold"), Text(str(v)))
        t.add_row(Text("round", style="bold"), Text(str(self.round_no)))
        t.add_row(Text("intent", style="bold"), Text(self.intent))
        t.add_row(Text("attempts", style="bold"), Text(str(self.n_attempts)))
        t.add_row(Text("best", style="bold"), Text(_speed(self.best) + " vs eager"))
        log = Text("\n".join(self.events[-12:]), style="dim")
        return Group(t, log)

    def _line(self, text: str) -> None:
        if self._live is None:
            super()._line(text)
        else:
            self.events.append(text)
            self._live.update(self._render())

    def start(self, s: Search, policy: Policy) -> None:
        self._header = {
            "search": f"{s.id} {s.name}",
            "task": s.task,
            "policy": policy.name + (f" ({policy.model})" if policy.model else ""),
        }
        super().start(s, policy)
        self._live = Live(self._render(), console=self.console, refresh_per_second=4, transient=False)
        self._live.start()

    def event(self, text: str) -> None:
        self._line(f"· {text}")

    def finish(self, res: DriverResult) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        super().finish(res)
