"""What the driver shows while it runs: a live panel in a terminal, plain lines otherwise.

"Best" is the search's best attempt, as the store defines it (`Store.best_attempt`): correct, timed on a
GPU, the highest speedup vs eager. CPU-interpreter timings never rank, so without a GPU the log says how
many attempts were correct instead of a speedup that means nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from worldmodel.models import Attempt, Evaluation, Node, Search
from worldmodel.render import fmt_speedup, no_best

if TYPE_CHECKING:
    from server.driver.loop import DriverResult
    from server.driver.policies.base import Policy


def _speed(x: float | None) -> str:
    return fmt_speedup(x) if x is not None else "-"


def _on(device: str | None) -> str:
    return f" [{device}]" if device else ""


def short_reason(reason: str) -> str:
    """A selection reason without its scoring formula ("score 0.713; best of 7 open intent(s)")."""
    head, sep, _ = reason.partition(" = ")
    if not sep:
        return reason
    tail = reason.rsplit("; ", 1)[1] if "; " in reason else ""
    head = head.split(": ", 1)[1] if head.startswith("#") and ": " in head else head
    return head + (f"; {tail}" if tail else "")


def plain_console() -> Console:
    """stdout; in a pipe or a file lines are never wrapped (a log line stays whole and greppable)."""
    c = Console(highlight=False)
    if not c.is_terminal:
        c.soft_wrap = True
    return c


class Display:
    """Plain lines: one per event. Used in logs, CI and with --plain."""

    def __init__(self, console: Console | None = None, *, verbose: bool = False) -> None:
        self.console = console or plain_console()
        self.verbose = verbose
        self.best: float | None = None  # the search's best speedup vs eager (GPU-timed, correct)
        self.best_id: int | None = None
        self.cpu_correct = 0  # correct attempts timed on the CPU interpreter (they rank nothing)
        self.round_no = 0
        self.intent = ""
        self.n_attempts = 0
        self.events: list[str] = []

    def _line(self, text: str) -> None:
        self.console.print(text, markup=False)

    def best_text(self) -> str:
        if self.best_id is not None:
            return f"{_speed(self.best)} (attempt #{self.best_id})"
        return f"none ({no_best(self.cpu_correct)})"

    def resuming(self, s: Search, explicit: bool) -> None:
        """Say that an existing search goes on, rather than a new one starting."""
        where = f"at round {s.round}" if s.round else "before its first round"
        hint = "" if explicit else "; --new for a fresh one"
        self._line(f"resuming {s.name} {where}{hint}")

    def start(self, s: Search, policy: Policy, *, best: Attempt | None = None, cpu_correct: int = 0) -> None:
        self.best = best.speedup if best else None
        self.best_id = best.id if best else None
        self.cpu_correct = cpu_correct
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
        why = reason if self.verbose else short_reason(reason)
        self._line(f"round {round_no}: intent {self.intent} — {why}")

    def attempt(self, node: Node, att: Attempt | None, ev: Evaluation | None = None) -> None:
        ev = ev or (att.evaluation if att else None)
        self.n_attempts += 1
        sp = att.speedup if att is not None else None
        if ev is not None and ev.ranks and att is not None:
            # the store's rule for the search's best: a correct GPU-timed attempt, higher speedup wins
            if self.best_id is None or (sp is not None and (self.best is None or sp > self.best)):
                self.best, self.best_id = sp, att.id
        elif ev is not None and ev.status == "ok" and ev.cpu_interpreted:
            self.cpu_correct += 1
        status = ev.status if ev else "?"
        detail = f" ({ev.error[:120]})" if ev and ev.error else ""
        device = ev.timings[0].device if ev and ev.timings else ""
        if ev is not None and ev.status == "ok" and ev.cpu_interpreted:
            speed = " [cpu-interpreter: correct, not timed]"
        else:
            speed = f", {_speed(sp)} vs eager" + (f" [{device}]" if device else "")
        self._line(
            f"  attempt {att.id if att else '-'} on #{node.id}: {status}{detail}{speed}; "
            f"best so far: {self.best_text()}"
        )

    def event(self, text: str) -> None:
        self.events.append(text)
        self._line(f"  · {text}")

    def close(self) -> None:
        """The run ends without `finish` (interrupted or crashed): leave the terminal tidy."""

    def finish(self, res: DriverResult) -> None:
        unpriced = f" (+{res.unpriced_calls} calls to unpriced models)" if res.unpriced_calls else ""
        best = (
            f"best attempt {res.best_attempt_id} at {_speed(res.best_speedup_vs_eager)} vs eager{_on(res.device)}"
            if res.best_attempt_id is not None
            else f"no best yet ({no_best(self.cpu_correct)})"
        )
        self._line(
            f"stopped: {res.stop_reason}. {res.rounds_run} rounds, {res.attempts} attempts, "
            f"{best}; {res.tokens} tokens, ${res.usd:.2f}{unpriced}, {res.wall_s:.0f}s"
        )
        for r in res.final:
            self._line(
                f"final: attempt {r.attempt_id}: {r.status}, {_speed(r.speedup_vs_eager)} vs eager, "
                f"{_speed(r.speedup_vs_compile)} vs torch.compile on {', '.join(r.workloads)}{_on(r.device)}"
            )
        if res.device == "cpu-interpreter" or (res.best_attempt_id is None and self.cpu_correct):
            self._line(
                "note: timed in the Triton interpreter on the CPU: a functional check of the pipeline, "
                "not a GPU speed; run on a GPU machine for real numbers"
            )


class LiveDisplay(Display):
    """A live panel (round, intent, attempt, status, best, tokens/cost) above a scrolling event log."""

    def __init__(self, console: Console | None = None, *, verbose: bool = False) -> None:
        super().__init__(console, verbose=verbose)
        self._live: Live | None = None
        self._header: dict[str, Any] = {}

    def _render(self) -> Group:
        t = Table.grid(padding=(0, 2))
        for k, v in self._header.items():
            t.add_row(Text(k, style="bold"), Text(str(v)))
        t.add_row(Text("round", style="bold"), Text(str(self.round_no)))
        t.add_row(Text("intent", style="bold"), Text(self.intent))
        t.add_row(Text("attempts", style="bold"), Text(str(self.n_attempts)))
        t.add_row(Text("best", style="bold"), Text(self.best_text()))
        log = Text("\n".join(self.events[-12:]), style="dim")
        return Group(t, log)

    def _line(self, text: str) -> None:
        if self._live is None:
            super()._line(text)
        else:
            self.events.append(text)
            self._live.update(self._render())

    def start(self, s: Search, policy: Policy, *, best: Attempt | None = None, cpu_correct: int = 0) -> None:
        self._header = {
            "search": f"{s.id} {s.name}",
            "task": s.task,
            "policy": policy.name + (f" ({policy.model})" if policy.model else ""),
        }
        super().start(s, policy, best=best, cpu_correct=cpu_correct)
        self._live = Live(self._render(), console=self.console, refresh_per_second=4, transient=False)
        self._live.start()

    def event(self, text: str) -> None:
        self._line(f"· {text}")

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def finish(self, res: DriverResult) -> None:
        self.close()
        super().finish(res)
