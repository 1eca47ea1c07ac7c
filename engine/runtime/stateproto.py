"""The state server's frames, shared by its server (``task/stateserver.py``, in a cluster-mode
task) and its client (``control/statereader.py``, in the job manager and the API): a 4-byte
big-endian length, then msgpack (data only), each bounded so a peer cannot make the other
side allocate without limit."""

from __future__ import annotations

import socket
import struct
from typing import Any

import msgpack

from weir.engine.runtime.netio import recv_exact

MAX_REQUEST = 1 << 20  # a request carries keys and bounds only
MAX_ANSWER = 256 << 20  # an answer carries at most a route's rows
LEN = struct.Struct(">I")


def send_frame(sock: socket.socket, body: Any) -> None:
    raw = msgpack.packb(body, use_bin_type=True)
    sock.sendall(LEN.pack(len(raw)) + raw)


def recv_frame(sock: socket.socket, limit: int, deadline: float | None) -> Any:
    (n,) = LEN.unpack(recv_exact(sock, 4, deadline))
    if n > limit:
        raise ConnectionError(f"a frame of {n} bytes is over the {limit}-byte limit")
    return msgpack.unpackb(recv_exact(sock, n, deadline), raw=False)
