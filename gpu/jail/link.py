"""The worker pool's end of a jail's limit-check socket (parent side; see ksearch.gpu.jail.launch, `--control`).

After every reply it reads from a jailed worker, the pool asks the jail's init to measure at once; init
answers "ok", or gives its verdict ("resource_limit: <kind>: ...") and ends the jail. So a verdict is the
call's that went over the limit, never the next candidate's. The candidate never holds the socket: init
closes its end before starting the command.
"""

from __future__ import annotations

import asyncio
import socket

from ksearch.gpu.jail.limits import RESOURCE_LIMIT


class JailLink:
    """One socket pair: `jail_fd` goes to the jail (`jail.wrap(control_fd=...)`), the other end stays here."""

    def __init__(self) -> None:
        self._mine, self._theirs = socket.socketpair()
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    @property
    def jail_fd(self) -> int:
        return self._theirs.fileno()

    def pass_fds(self) -> tuple[int, ...]:
        """What the subprocess inherits: the jail's end, while it has not been handed over."""
        return (self._theirs.fileno(),) if self._theirs.fileno() >= 0 else ()

    async def handed_over(self) -> None:
        """The jail holds its end now: close it here and start reading this one."""
        self._theirs.close()
        self._streams = await asyncio.open_unix_connection(sock=self._mine)

    async def ask(self, timeout_s: float = 60.0) -> str | None:
        """None when the jail is within its limits; else its verdict, or "" when it did not answer (gone)."""
        if self._streams is None:
            return None
        reader, writer = self._streams
        try:
            writer.write(b"?\n")
            await writer.drain()
            answer = await asyncio.wait_for(reader.readline(), timeout_s)
        except (OSError, TimeoutError):
            answer = b""
        if answer.startswith(b"ok"):
            return None
        text = answer.decode(errors="replace").strip()
        return text if text.startswith(RESOURCE_LIMIT) else ""

    def close(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
            self._streams = None
        else:
            self._mine.close()
        self._theirs.close()
