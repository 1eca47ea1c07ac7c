"""Blocking socket reads shared by the control channel's client and the exchange's connecting
side: exact lengths by one absolute deadline, so a peer that dribbles bytes is cut off as surely
as a silent one."""

from __future__ import annotations

import socket
import time


def recv_exact(sock: socket.socket, n: int, deadline: float | None) -> bytes:
    """``n`` bytes, all by ``deadline`` (``time.monotonic()``; None: as long as it takes)."""
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {n}-byte answer by the deadline")
            sock.settimeout(left)
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the other side closed the connection")
        buf += chunk
    return bytes(buf)
