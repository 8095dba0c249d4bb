"""What the driver shows while it runs: a live footer in a terminal, plain lines otherwise.

In a terminal (`LiveDisplay`) finished things scroll (one line per round, per attempt with its verdict,
per event) above a footer that is redrawn four times a second: the phase of each intent in flight, rounds
and attempts against their budgets, elapsed and remaining time, the best so far and the spend. When the
run ends, however it ends, the footer is drawn once more with the final state and left on screen.

In a pipe or with --plain (`Display`) the same events are plain lines, never wrapped, with no control
codes, so a log stays greppable.

"Best" is the search's best attempt, as the store defines it (`Store.best_attempt`): correct, timed on a
GPU, the highest speedup vs eager. CPU-interpreter timings never rank, so without a GPU the log says how
many attempts were correct instead of a speedup that means nothing.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field
from rich.console import Console, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from ksearch.tools.llm_calls import call_cache_text, usage_text
from ksearch.worldmodel.models import Attempt, Evaluation, LLMCallRecord, Node, Search
from ksearch.worldmodel.render import fmt_speedup, no_best

if TYPE_CHECKING:
    from ksearch.server.driver.loop import DriverResult
    from ksearch.server.driver.policies.base import Policy

Phase = Literal["starting", "init", "select", "refine", "update", "final", "done", "stopped"]


class Limits(BaseModel):
    """The budgets this run stops at, as the driver applies them (its options over the search's)."""

    rounds: int | None = Field(None, description="Rounds this run may start")
    attempts: int | None = Field(None, description="Attempts in the whole search")
    wall_s: float | None = Field(None, description="Seconds this run may take")
    tokens: int | None = None
    usd: float | None = None


def _speed(x: float | None) -> str:
    return fmt_speedup(x) if x is not None else "-"


def _on(device: str | None) -> str:
    return f" [{device}]" if device else ""


def duration(seconds: float) -> str:
    """4s, 1m05s, 2h03m: short enough for a footer."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def short_reason(reason: str) -> str:
    """A selection reason without its scoring formula ("score 0.713; best of 7 open intent(s)")."""
    head, sep, _ = reason.partition(" = ")
    if not sep:
        return reason
    tail = reason.rsplit("; ", 1)[1] if "; " in reason else ""
    head = head.split(": ", 1)[1] if head.startswith("#") and ": " in head else head
    return head + (f"; {tail}" if tail else "")


def verdict(ev: Evaluation | None) -> str:
    """An evaluation in a word: correct / compile_error / incorrect / crash / ... ("?" when none)."""
    if ev is None:
        return "?"
    if ev.status == "ok":
        return "correct (pure PyTorch, no kernel of its own)" if ev.pure_pytorch else "correct"
    return ev.status


def verdict_word(status: str) -> str:
    """A final row's status in the attempt lines' words."""
    return "correct" if status == "ok" else status


def first_sentence(text: str) -> str:
    """A text's first sentence, whole (a log line is never cut inside a word); the text when it has one."""
    head, sep, _ = text.strip().partition(". ")
    return head + "." if sep else text.strip()


def first_line(text: str, limit: int = 120) -> str:
    """An error's first non-empty line, cut to `limit`: one event stays one line."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def plain_console() -> Console:
    """stdout; in a pipe or a file lines are never wrapped (a log line stays whole and greppable)."""
    c = Console(highlight=False)
    if not c.is_terminal:
        c.soft_wrap = True
    return c


@dataclass
class _Lane:
    """An intent in flight: its phase and its attempts in this refine phase."""

    title: str
    phase: Phase
    attempts: int = 0


def log_console(path: Path) -> Console:
    """A console that appends plain lines to a log file (a suite's task), never wrapped."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return Console(file=path.open("a", encoding="utf-8"), width=400, color_system=None, soft_wrap=True)


class Display:
    """Plain lines: one per event. Used in logs, CI and with --plain."""

    def __init__(self, console: Console | None = None, *, verbose: bool = False) -> None:
        self.console = console or plain_console()
        self.verbose = verbose
        self.db_flag = ""  # the run's "--db PATH", repeated in the commands it suggests
        self.start_flag = ""  # its "--start FILE", repeated in the new searches it suggests
        self.best: float | None = None  # the search's best speedup vs eager (GPU-timed, correct)
        self.best_id: int | None = None
        self.cpu_correct = 0  # correct attempts timed on the CPU interpreter (they rank nothing)
        self.round_no = 0
        self.intent = ""
        self.n_attempts = 0  # attempts made by this run
        self.attempts_before = 0  # attempts the search held when this run started
        self.rounds_started = 0
        self.rounds_done = 0
        self.limits = Limits()
        self.cap = 0  # attempts per intent (max_attempts_per_intent)
        self.phase_now: Phase = "starting"
        self.lanes: dict[int, _Lane] = {}
        self.tokens = 0
        self.usd = 0.0
        self.started = time.monotonic()
        self.ended: float | None = None  # when the run ended: elapsed time stops there
        self.events: list[str] = []
        self.offline: tuple[str, str] | None = None  # (search, task) of a run with no language model

    def _line(self, text: str) -> None:
        self.console.print(text, markup=False)

    def best_text(self) -> str:
        if self.best_id is not None:
            return f"{_speed(self.best)} (attempt #{self.best_id})"
        return f"none ({no_best(self.cpu_correct)})"

    @property
    def attempts_total(self) -> int:
        return self.attempts_before + self.n_attempts

    def elapsed(self) -> float:
        return (self.ended if self.ended is not None else time.monotonic()) - self.started

    def remaining(self) -> tuple[float, bool] | None:
        """(seconds left, whether that is an estimate) by the budget that runs out first; None: unknown.

        The wall budget is exact; rounds and attempts are extrapolated from this run's pace so far."""
        elapsed = self.elapsed()
        left: list[tuple[float, bool]] = []
        lim = self.limits
        if lim.wall_s is not None:
            left.append((lim.wall_s - elapsed, False))
        # estimates only while work of that kind is left: at 0 the run is finishing, not "0s" away
        if lim.rounds is not None and self.rounds_done and self.rounds_done < lim.rounds:
            left.append((elapsed / self.rounds_done * (lim.rounds - self.rounds_done), True))
        if lim.attempts is not None and self.n_attempts and self.attempts_total < lim.attempts:
            left.append((elapsed / self.n_attempts * (lim.attempts - self.attempts_total), True))
        if not left or self.phase_now == "final":
            return None
        secs, estimate = min(left)
        return max(0.0, secs), estimate

    def progress_text(self) -> str:
        """Rounds and attempts against their budgets, time, best, spend: one line."""
        lim = self.limits
        rounds = f"rounds {self.rounds_started}" + (f"/{lim.rounds}" if lim.rounds is not None else "")
        att = f"attempts {self.attempts_total}" + (f"/{lim.attempts}" if lim.attempts is not None else "")
        t = f"{duration(self.elapsed())} elapsed"
        rem = self.remaining() if self.ended is None else None
        if rem is not None:
            t += f", {'~' if rem[1] else ''}{duration(rem[0])} left"
        spend = f"{self.tokens:,} tokens ${self.usd:.2f}" if self.tokens or self.usd else ""
        return " · ".join(p for p in (rounds, att, f"best {self.best_text()}", t, spend) if p)

    # ------------------------------------------------------------------ what the driver reports

    def resuming(self, s: Search, explicit: bool) -> None:
        """Say that an existing search goes on, rather than a new one starting."""
        where = f"at round {s.round}" if s.round else "before its first round"
        hint = "" if explicit else "; --new for a fresh one"
        self._line(f"resuming {s.name} {where}{hint}")

    def start(
        self,
        s: Search,
        policy: Policy,
        *,
        best: Attempt | None = None,
        cpu_correct: int = 0,
        attempts: int = 0,
        limits: Limits | None = None,
    ) -> None:
        """The run begins; `attempts` is how many the search already holds, `limits` this run's budgets."""
        self.best = best.speedup if best else None
        self.best_id = best.id if best else None
        self.cpu_correct = cpu_correct
        self.attempts_before = attempts
        self.limits = limits or Limits()
        self.cap = s.config.max_attempts_per_intent
        self.started = time.monotonic()
        what = f"policy: {policy.name}" + (
            f" ({policy.model})" if policy.model and policy.model != policy.name else ""
        )
        if policy.name == "tuner":
            self.offline = (s.name, s.task)
            what += (
                " — offline tuner, no language model (set ANTHROPIC_API_KEY or --policy openai for an LLM)"
            )
        self._line(f"search {s.id} '{s.name}' on task {s.task}; {what}")

    def phase(self, phase: Phase, node: Node | None = None) -> None:
        """A phase begins: for one intent in flight (refine, update) or for the whole run."""
        if node is not None and node.kind == "intent":
            lane = self.lanes.setdefault(node.id, _Lane(f"#{node.id} {node.title}", phase))
            lane.phase = phase
        else:
            self.phase_now = phase
        self._changed()

    def _changed(self) -> None:
        """The state changed without a line to print (a live footer redraws now)."""

    def round(self, round_no: int, node: Node, reason: str) -> None:
        self.round_no, self.intent = round_no, f"#{node.id} {node.title}"
        self.rounds_started += 1
        self.lanes[node.id] = _Lane(self.intent, "refine")
        self._round_line(round_no, reason if self.verbose else short_reason(reason))

    def _round_line(self, round_no: int, why: str) -> None:
        self._line(f"round {round_no}: intent {self.intent} — {why}")

    def round_given_back(self, node: Node) -> None:
        """The intent was declined before any attempt: its round does not count."""
        self.rounds_started -= 1
        self.lanes.pop(node.id, None)
        self._changed()

    def round_done(self, node: Node) -> None:
        """The intent's round is over (refined and updated)."""
        self.rounds_done += 1
        self.lanes.pop(node.id, None)
        self._changed()

    def _count(self, att: Attempt | None, ev: Evaluation | None) -> bool:
        """Account one attempt; True when it became the search's best."""
        self.n_attempts += 1
        sp = att.speedup if att is not None else None
        if ev is not None and ev.ranks and att is not None:
            # the store's rule for the search's best: a correct GPU-timed attempt, higher speedup wins
            if self.best_id is None or (sp is not None and (self.best is None or sp > self.best)):
                self.best, self.best_id = sp, att.id
                return True
        elif ev is not None and ev.status == "ok" and ev.cpu_interpreted:
            self.cpu_correct += 1
        return False

    def attempt(self, node: Node, att: Attempt | None, ev: Evaluation | None = None) -> None:
        ev = ev or (att.evaluation if att else None)
        new_best = self._count(att, ev)
        lane = self.lanes.get(node.id)
        if lane is not None:
            lane.attempts += 1
        self._attempt_line(node, att, ev, new_best)

    def _attempt_line(self, node: Node, att: Attempt | None, ev: Evaluation | None, new_best: bool) -> None:
        sp = att.speedup if att is not None else None
        detail = f" ({first_line(ev.error)})" if ev and ev.error else ""
        device = ev.timings[0].device if ev and ev.timings else ""
        if ev is not None and ev.status == "ok" and ev.cpu_interpreted:
            speed = " [cpu-interpreter: correct, not timed]"
        elif ev is not None and ev.status == "ok":
            speed = f", {_speed(sp)} vs eager" + (f" [{device}]" if device else "")
        else:
            speed = ""
        self._line(
            f"  attempt {att.id if att else '-'} on #{node.id}: {verdict(ev)}{detail}{speed}; "
            f"best so far: {self.best_text()}"
        )

    def llm_call(self, rec: LLMCallRecord) -> None:
        """One model call, as the driver records it."""
        self.tokens += rec.tokens_in + rec.tokens_out
        self.usd += rec.cost_usd
        if self._quiet_call(rec):
            return
        cache = call_cache_text(rec)
        self.event(
            f"{rec.provider} {rec.phase}: {rec.tokens_in}+{rec.tokens_out} tokens"
            + (f" ({cache})" if cache else "")
            + f", ${rec.cost_usd:.4f}, {rec.latency_s:.1f}s"
            + (f" — {rec.error}" if rec.error else "")
        )

    def _quiet_call(self, rec: LLMCallRecord) -> bool:
        """Whether a model call goes without a line of its own (a log keeps every one)."""
        return False

    def event(self, text: str) -> None:
        self.events.append(text)
        self._event_line(text)

    def _event_line(self, text: str) -> None:
        self._line(f"  · {text}")

    def close(self) -> None:
        """The run ends without `finish` (interrupted or crashed): leave the terminal tidy."""
        self._end("stopped")

    def _end(self, phase: Phase) -> None:
        if self.ended is None:
            self.ended = time.monotonic()
        self.phase_now = phase
        self.lanes.clear()

    def finish(self, res: DriverResult) -> None:
        # a policy that could not go on leaves the search resumable: stopped, not finished
        self._end("stopped" if res.stop_reason.startswith("policy stopped") else "done")
        for line in self.finish_lines(res):
            self._line(line)

    def finish_lines(self, res: DriverResult) -> list[str]:
        unpriced = f" (+{res.unpriced_calls} calls to unpriced models)" if res.unpriced_calls else ""
        best = (
            f"best attempt {res.best_attempt_id} at {_speed(res.best_speedup_vs_eager)} vs eager{_on(res.device)}"
            if res.best_attempt_id is not None
            else f"no best yet ({no_best(self.cpu_correct)})"
        )
        out = [
            f"stopped: {res.stop_reason}. {res.rounds_run} rounds, {res.attempts} attempts, "
            f"{best}; {res.tokens} tokens, ${res.usd:.2f}{unpriced}, {res.wall_s:.0f}s"
        ]
        usage = usage_text(res.llm) if res.llm is not None else ""
        if usage:  # the model's tokens and dollars by what the prompt cache did with them
            out.append(usage)
        for r in res.final:
            if r.device == "cpu-interpreter" and r.status == "ok":  # a CPU number is no speed: say so
                out.append(
                    f"final: attempt {r.attempt_id}: correct on {', '.join(r.workloads)} "
                    "[cpu-interpreter: not timed]"
                )
                continue
            out.append(
                f"final: attempt {r.attempt_id}: {verdict_word(r.status)}, {_speed(r.speedup_vs_eager)} vs eager, "
                f"{_speed(r.speedup_vs_compile)} vs {r.compile_baseline} on {', '.join(r.workloads)}{_on(r.device)}"
                + (f", timed: {r.timing_protocol}" if r.timing_protocol else "")
            )
        if res.device == "cpu-interpreter" or (res.best_attempt_id is None and self.cpu_correct):
            out.append(
                "note: timed in the Triton interpreter on the CPU: a functional check of the pipeline, "
                "not a GPU speed; run on a GPU machine for real numbers"
            )
        return out + self.model_lines()

    def model_lines(self) -> list[str]:
        """After a run with no language model: where one takes over, and where to see what was tried."""
        if self.offline is None:
            return []
        name, task = self.offline
        new = " ".join(x for x in (shlex.quote(task), "--new", self.start_flag, self.db_flag) if x)
        db = f" {self.db_flag}" if self.db_flag else ""
        return [
            "next: the offline tuner only moves the seed's declared TUNABLES; a language model writes new kernels "
            "and keeps this tree of intents. Plug one in:",
            f"  ANTHROPIC_API_KEY=... ksearch run {new}   (Anthropic)",
            f"  ksearch run {new} --policy openai --base-url http://HOST:PORT/v1 --model NAME   "
            "(any OpenAI-compatible endpoint; key in OPENAI_API_KEY)",
            f"  ksearch serve{db}   (an MCP assistant — Claude Code, Cursor, VS Code — drives the same tools: "
            'README, "Use ksearch from an MCP host")',
            f"see it: ksearch tree {name}{db} (what was tried and why), ksearch ui{db} (the page: the tree live, each "
            f"attempt's code and numbers), ksearch export {name}{db} --html -o {name}.html",
        ]


_PHASE_TEXT: dict[Phase, str] = {
    "starting": "starting",
    "init": "init: measuring the seed, proposing the first intents",
    "select": "select: choosing the next intent",
    "refine": "refine",
    "update": "update: reflecting, editing the tree",
    "final": "final evaluation of the best candidates on every workload",
    "done": "done",
    "stopped": "stopped",
}


class LiveDisplay(Display):
    """Lines scroll above a live footer (phase, progress against the budgets, time, best).

    Falls back to plain lines when the console is not a terminal."""

    def __init__(self, console: Console | None = None, *, verbose: bool = False) -> None:
        super().__init__(console, verbose=verbose)
        self._live: Live | None = None
        self._spinner = Spinner("dots", style="cyan")
        self.stop_reason = ""
        if not self.console.is_terminal:
            self.console.soft_wrap = True  # a pipe gets whole lines, as from `Display`

    # the footer ------------------------------------------------------------

    def footer(self) -> RenderableType:
        grid = Table.grid(padding=(0, 1))
        grid.add_column(width=2)
        grid.add_column(overflow="ellipsis", no_wrap=True)
        if self.ended is not None:
            done = self.phase_now == "done"
            mark = Text("✔" if done else "■", style="bold green" if done else "bold yellow")
            what = self.stop_reason or _PHASE_TEXT[self.phase_now]
            grid.add_row(mark, Text(f"{'finished' if done else 'stopped'}: {what}", style="bold"))
        elif self.lanes:
            for lane in list(self.lanes.values()):  # a snapshot: the refresh thread draws, the loop edits
                head = Text(f"{lane.phase:<7}", style="bold cyan")
                head.append(f" {lane.title}", style="bold")
                if lane.phase == "refine":
                    head.append(f"  attempt {lane.attempts + 1}/{self.cap}", style="cyan")
                grid.add_row(self._spinner, head)
        else:
            grid.add_row(self._spinner, Text(_PHASE_TEXT[self.phase_now], style="bold cyan"))
        grid.add_row(Text(""), Text(self.progress_text(), style="dim" if self.ended is None else ""))
        return grid

    # lines above it ---------------------------------------------------------

    def _changed(self) -> None:
        if self._live is not None:
            self._live.refresh()

    def _print(self, text: Text) -> None:
        # Redraw first: rich reprints its last drawn footer under every line printed above it.
        self._changed()
        self.console.print(text)

    def _line(self, text: str) -> None:
        self._print(Text(text))

    def _round_line(self, round_no: int, why: str) -> None:
        if self._live is None:
            super()._round_line(round_no, why)
            return
        t = Text(f"round {round_no}", style="bold")
        t.append(f"  {self.intent}")
        t.append(f"  — {why}", style="dim")
        self._print(t)

    def _attempt_line(self, node: Node, att: Attempt | None, ev: Evaluation | None, new_best: bool) -> None:
        if self._live is None:
            super()._attempt_line(node, att, ev, new_best)
            return
        ok = ev is not None and ev.status == "ok"
        inconclusive = ev is not None and ev.inconclusive
        mark, style = ("✓", "green") if ok else ("?", "yellow") if inconclusive else ("✗", "red")
        t = Text(f"  {mark} ", style=style)
        t.append(f"attempt {att.id if att else '-'} on #{node.id}  ")
        t.append(verdict(ev), style=f"bold {style}")
        if ok and ev is not None and ev.cpu_interpreted:
            t.append("  cpu-interpreter: not timed", style="dim")
        elif ok and att is not None:
            device = ev.timings[0].device if ev and ev.timings else ""
            t.append(f"  {_speed(att.speedup)} vs eager", style="bold")
            t.append(_on(device), style="dim")
            if new_best:
                t.append("  new best", style="bold yellow")
        if ev is not None and ev.error:
            t.append(f"  {first_line(ev.error)}", style="dim")
        self._print(t)

    def _quiet_call(self, rec: LLMCallRecord) -> bool:
        # the footer shows the spend; a line per call is for --verbose (and for a failed call)
        return self._live is not None and not self.verbose and not rec.error

    def _event_line(self, text: str) -> None:
        if self._live is None:
            super()._event_line(text)
            return
        self._print(Text(f"  · {text}", style="dim"))

    # start and end ----------------------------------------------------------

    def start(
        self,
        s: Search,
        policy: Policy,
        *,
        best: Attempt | None = None,
        cpu_correct: int = 0,
        attempts: int = 0,
        limits: Limits | None = None,
    ) -> None:
        super().start(s, policy, best=best, cpu_correct=cpu_correct, attempts=attempts, limits=limits)
        if not self.console.is_terminal:
            return  # a pipe: plain lines, no control codes
        self._live = Live(
            console=self.console,
            get_renderable=self.footer,
            refresh_per_second=4,  # the spinner and the clocks move even while nothing happens
            transient=False,
        )
        self._live.start()

    def _stop(self) -> None:
        """Draw the footer once more with the final state, and leave it on screen."""
        if self._live is not None:
            self._live.refresh()
            self._live.stop()
            self._live = None

    def close(self) -> None:
        if self.ended is None:
            self.stop_reason = "interrupted"
        super().close()
        self._stop()

    def finish(self, res: DriverResult) -> None:
        if self._live is None:
            super().finish(res)
            return
        for line in self.finish_lines(res)[1:]:  # final rows and notes scroll; the footer is the summary
            self._line(line)
        self._end("stopped" if res.stop_reason.startswith("policy stopped") else "done")
        unpriced = f" (+{res.unpriced_calls} calls to unpriced models)" if res.unpriced_calls else ""
        self.stop_reason = res.stop_reason + unpriced
        # the footer's last state is the store's: its count of attempts, its best, the recorded spend
        self.attempts_before = res.attempts - self.n_attempts
        self.best, self.best_id = res.best_speedup_vs_eager, res.best_attempt_id
        self.tokens, self.usd = res.tokens, res.usd
        self._stop()
