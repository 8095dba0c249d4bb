"""How `ksearch run` counts signals: `timeout -s INT` (and a shell's job control) delivers one SIGINT to the
process and again to its group, both handled at once; that is one interruption, stopped cleanly. A second
Ctrl-C a moment later still ends the process at once. (The stopper is driven directly: a real double delivery
is often merged by the kernel into one, so only this shows the rule every time.)"""

from __future__ import annotations

import asyncio
import signal

import pytest

from ksearch.server.cli import interrupt


class Exited(Exception):
    pass


@pytest.fixture
def stopper(monkeypatch: pytest.MonkeyPatch) -> interrupt._Stopper:
    st = interrupt._Stopper("stopping", lambda: "")

    def exit_now(signum: int, why: str, *, flush: bool = True) -> None:
        raise Exited(why)

    monkeypatch.setattr(st, "exit_now", exit_now)
    monkeypatch.setattr(interrupt, "_write_err", lambda text: None)
    return st


def test_the_same_signal_delivered_twice_at_once_is_one_interruption(stopper: interrupt._Stopper) -> None:
    async def scenario() -> None:
        stopper.work = asyncio.get_running_loop().create_future()
        stopper.on_signal(signal.SIGINT)
        stopper.on_signal(signal.SIGINT)  # the group's copy, handled in the same loop pass
        assert stopper.signum == signal.SIGINT and stopper.work.cancelled()
        await asyncio.sleep(2 * interrupt.SAME_SIGNAL_S)
        with pytest.raises(Exited, match="interrupted again"):  # a second key press
            stopper.on_signal(signal.SIGINT)

    try:
        asyncio.run(scenario())
    finally:
        stopper.disarm()


def test_another_signal_at_once_still_ends_the_process(stopper: interrupt._Stopper) -> None:
    async def scenario() -> None:
        stopper.work = asyncio.get_running_loop().create_future()
        stopper.on_signal(signal.SIGINT)
        with pytest.raises(Exited, match="interrupted again"):  # SIGTERM after SIGINT is not a copy of it
            stopper.on_signal(signal.SIGTERM)

    try:
        asyncio.run(scenario())
    finally:
        stopper.disarm()
