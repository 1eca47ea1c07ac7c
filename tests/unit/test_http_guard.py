"""``ConnectionGuard`` alone, on a real event loop with stand-in connections: past the cap the
connection that has waited longest is closed; an address off loopback may hold only its share
of the waiting connections (its own oldest goes), while loopback peers share the whole cap; a
connection that stops waiting (its head arrived) is never closed for the others."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from weir.app.http_guard import ConnectionGuard


@dataclass(eq=False)
class Transport:
    aborted: bool = False

    def abort(self) -> None:
        self.aborted = True


@dataclass(eq=False)
class Conn:
    client: tuple[str, int]
    transport: Transport = field(default_factory=Transport)


def _run(check: Callable[[], None]) -> None:
    async def main() -> None:
        check()

    asyncio.run(main())


def test_the_longest_waiting_goes_past_the_cap() -> None:
    def check() -> None:
        guard = ConnectionGuard(3)
        conns = [Conn(("127.0.0.1", 1000 + i)) for i in range(5)]
        guard.wait(conns[0], "head")
        guard.done(conns[0])  # its head arrived: the server works on it now
        for c in conns[1:]:
            guard.wait(c, "head")
        assert [c.transport.aborted for c in conns] == [False, True, False, False, False]
        assert guard.waiting == 3

    _run(check)


def test_a_remote_address_holds_only_its_share() -> None:
    def check() -> None:
        guard = ConnectionGuard(8, per_peer=2)
        local = [Conn(("127.0.0.1", 2000 + i)) for i in range(3)]
        remote = [Conn(("203.0.113.9", 3000 + i)) for i in range(4)]
        other = Conn(("198.51.100.7", 4000))
        for c in [*local, *remote, other]:
            guard.wait(c, "head")
        # the remote address's two oldest went for its newer ones; nobody else lost anything
        assert [c.transport.aborted for c in remote] == [True, True, False, False]
        assert not any(c.transport.aborted for c in [*local, other])
        assert guard.waiting == 6

    _run(check)


def test_a_wait_of_the_same_kind_keeps_its_deadline() -> None:
    async def main() -> None:
        guard = ConnectionGuard(4, deadlines={"head": 0.2, "body": 5.0})
        c = Conn(("127.0.0.1", 5000))
        guard.wait(c, "head")
        await asyncio.sleep(0.1)
        guard.wait(c, "head")  # a byte more of the same head: the deadline stays
        await asyncio.sleep(0.15)
        assert c.transport.aborted

    asyncio.run(main())


def test_the_sweep_closes_only_expired_waits_and_stops_when_none_wait() -> None:
    async def main() -> None:
        guard = ConnectionGuard(8, deadlines={"head": 0.2, "body": 0.6, "write": 0.6})
        assert guard.tick == 0.025  # an eighth of the shortest deadline
        head, body, done = (Conn(("127.0.0.1", 6000 + i)) for i in range(3))
        guard.wait(body, "body")  # the oldest, but with the longer deadline
        guard.wait(head, "head")
        guard.wait(done, "head")
        guard.done(done)
        await asyncio.sleep(0.3)
        assert (head.transport.aborted, body.transport.aborted, done.transport.aborted) == (
            True,
            False,
            False,
        )
        await asyncio.sleep(0.4)
        assert body.transport.aborted and guard.waiting == 0
        await asyncio.sleep(0.1)  # nobody waits: the sweep is not scheduled again
        loop = asyncio.get_running_loop()
        assert not [h for h in getattr(loop, "_scheduled", []) if not h.cancelled()]
        late = Conn(("127.0.0.1", 7000))
        guard.wait(late, "head")  # a new wait starts the sweep again
        await asyncio.sleep(0.3)
        assert late.transport.aborted

    asyncio.run(main())


async def _within(seconds: float, condition: Callable[[], bool]) -> bool:
    """Whether ``condition`` holds within ``seconds`` of the loop's time (the sweep runs on
    this loop, so the wait yields to it)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


@dataclass(eq=False)
class BrokenTransport(Transport):
    def abort(self) -> None:
        self.aborted = True
        raise OSError(9, "Bad file descriptor")


def test_a_close_that_raises_neither_stops_the_sweep_nor_spares_the_others() -> None:
    """The sweep reschedules itself at its end: a close that raised (a transport already
    torn down) ended it for good, and no later wait ever met its deadline (a slow client
    could then hold its connection, and its slot, for ever)."""

    async def main() -> None:
        guard = ConnectionGuard(8, deadlines={"head": 0.05})
        broken = Conn(("127.0.0.1", 5000), BrokenTransport())
        first = Conn(("127.0.0.1", 5001))
        guard.wait(broken, "head")
        guard.wait(first, "head")
        assert await _within(5.0, lambda: broken.transport.aborted and first.transport.aborted)
        later = Conn(("127.0.0.1", 5002))
        guard.wait(later, "head")
        assert await _within(5.0, lambda: later.transport.aborted and guard.waiting == 0)

    asyncio.run(main())
