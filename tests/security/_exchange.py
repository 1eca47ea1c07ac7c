"""The attacker of issue 17's first item, and the job it attacks.

``ATTACKER`` is a standard-library script run as ``stranger``: for ``SECONDS`` it watches for the
job's listening sockets, and against each new one it finds it

- connects and claims to be worker 1 the way weir's exchange once accepted peers (a 4-byte
  index), then sends a length-prefixed pickle whose ``__reduce__`` writes ``MARKER``;
- sends a forged handshake (weir's magic, a made-up nonce), a wrong proof, then the pickle;
- sends a frame header claiming 4 GiB, then garbage;
- opens a connection and stays silent;
- or, with ``SQUAT`` (instead of the above), binds the next worker's name beside an abstract
  ``weir-<namespace>-<i>`` socket (before that worker does) and answers whoever connects with
  the pickle.

It prints one JSON line per thing it tried and what happened, so a test can assert the attacker
got nowhere (and that it did try).

An attacker would find the sockets in ``/proc/net/unix`` and ``/proc/net/tcp``, which every
account can read; here the test lists the ones of the attacked job's own processes
(``Targets``: by socket inode) in a file the attacker reads, so that it never touches the other
weir jobs and servers that share this machine while the suite runs.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from tests.support import children

ATTACKER = r"""
import json, os, pickle, random, socket, struct, sys, threading, time
MARKER, SECONDS, SQUAT, TARGETS = sys.argv[1], float(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]

class Payload:
    def __reduce__(self):
        return (exec, (f"open({MARKER!r}, 'w').write('pwned')",))

PICKLE = pickle.dumps(Payload())
FRAME = struct.pack(">I", len(PICKLE)) + PICKLE
held = []

said = threading.Lock()

def say(**kw):
    with said:  # the endpoints' threads print whole lines
        sys.stdout.write(json.dumps(kw) + "\n")
        sys.stdout.flush()

def endpoints():
    try:
        return {tuple(t) for t in json.loads(open(TARGETS).read())}
    except (OSError, ValueError):
        return set()

def dial(kind, where):
    if kind == "tcp":
        s = socket.create_connection(("127.0.0.1", where), timeout=2)
    else:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect("\0" + where[1:] if where.startswith("@") else where)
    return s

def attack(kind, where, how):
    try:
        s = dial(kind, where)
    except OSError as exc:
        say(target=f"{kind}:{where}", attack=how, result=f"connect: {type(exc).__name__}")
        return
    try:
        if how == "pickle":
            s.sendall(struct.pack(">I", 1) + FRAME)
        elif how == "forged":
            s.sendall(b"weirX\0\0\1" + struct.pack(">QI", 0, 1) + os.urandom(32))
            s.settimeout(15)  # a worker answers once it has heard where its peers are
            s.recv(84)
            s.sendall(os.urandom(32) + FRAME)
        elif how == "oversized":
            s.sendall(b"\xff\xff\xff\xff" + os.urandom(64))
        else:
            held.append(s)
            say(target=f"{kind}:{where}", attack=how, result="connected")
            return
        time.sleep(0.2)
        s.settimeout(0.5)
        try:
            got = s.recv(1 << 16)
            result = f"answered {len(got)} bytes"
        except OSError as exc:
            result = f"recv: {type(exc).__name__}"
        say(target=f"{kind}:{where}", attack=how, result=result)
    except OSError as exc:
        say(target=f"{kind}:{where}", attack=how, result=f"{type(exc).__name__}")
    finally:
        if s not in held:
            s.close()

def attack_all(kind, where):
    for how in ("pickle", "forged", "oversized", "silent"):
        attack(kind, where, how)

def squat(name):
    base, _, index = name.rpartition("-")
    for i in (int(index) + 1,):  # the next worker's name: the ones after it connect to it
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.bind("\0" + f"{base[1:]}-{i}")
            s.listen(8)
        except OSError as exc:
            say(squat=f"{base}-{i}", result=type(exc).__name__)
            continue
        say(squat=f"{base}-{i}", result="bound")
        threading.Thread(target=serve_squat, args=(s,), daemon=True).start()

def serve_squat(s):
    while True:
        c, _ = s.accept()
        c.sendall(FRAME)
        held.append(c)
        say(squatted="a worker connected to the squatted name")

seen = set()
deadline = time.monotonic() + SECONDS
while time.monotonic() < deadline:
    for kind, where in sorted(endpoints() - seen, key=str):
        seen.add((kind, where))
        if SQUAT:  # only squat: what the job then connects to is the attacker's alone
            if kind == "unix" and where.startswith("@weir-"):
                squat(where)
            continue
        # each endpoint in a thread of its own: a slow answer at one (a forged handshake waits
        # up to 15 s) never keeps the attacker from the next, found while it waits
        threading.Thread(target=attack_all, args=(kind, where), daemon=True).start()
    time.sleep(0.005)
say(done=True, seen=len(seen))
"""

# Worker 1 (and any higher) loads the job 3 s late, so the attacker reliably finds worker 0
# listening before its real peers connect: the race an attacker would otherwise have to win.
JOB = """
import multiprocessing, time
from weir import Job, WatermarkStrategy, agg, sources, windows

name = multiprocessing.current_process().name
if name.startswith("weir-") and not name.endswith("-worker-0"):
    time.sleep(3)
job = Job("x")
(
    job.source(sources.jsonl({path!r}), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=0))
    .key_by("id")
    .window(windows.tumbling(ms=1000))
    .aggregate("counts", n=agg.count())
)
"""

EVENTS = 20_000
KEYS = 37
STEP_MS = 5


def write_job(root: Path) -> Path:
    data = root / "in.jsonl"
    with open(data, "w") as fh:
        for i in range(EVENTS):
            fh.write(json.dumps({"id": f"k{i % KEYS}", "ts": i * STEP_MS, "v": 1}) + "\n")
    job = root / "job.py"
    job.write_text(JOB.format(path=str(data)))
    return job


def expected_counts() -> dict[tuple[str, int], int]:
    out: dict[tuple[str, int], int] = {}
    for i in range(EVENTS):
        k = (f"k{i % KEYS}", i * STEP_MS // 1000 * 1000)
        out[k] = out.get(k, 0) + 1
    return out


def result_counts(path: Path) -> dict[tuple[str, int], int]:
    out: dict[tuple[str, int], int] = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        out[(r["key"], r["start"])] = r["n"]
    return out


class Targets:
    """Writes, every 20 ms, the listening sockets of ``pid``'s process tree to ``path`` as JSON
    ``[[kind, where], ...]``: ``["unix", "@abstract" or "/path"]``, ``["tcp", port]``."""

    def __init__(self, pid: int, path: Path) -> None:
        self._pid = pid
        self._path = path
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Targets:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            found = _listening(_inodes(self._pid))
            tmp = self._path.with_suffix(".tmp")
            tmp.write_text(json.dumps(sorted(found, key=str)))
            tmp.chmod(0o644)
            os.replace(tmp, self._path)


def _inodes(pid: int) -> set[str]:
    pids = {pid}
    try:
        pids |= {c for p in list(pids) for c in children(p)}
        pids |= {c for p in list(pids) for c in children(p)}
    except OSError:
        pass
    found: set[str] = set()
    for p in pids:
        try:
            fds = os.listdir(f"/proc/{p}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{p}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                found.add(link[8:-1])
    return found


def _listening(inodes: set[str]) -> list[tuple[str, str | int]]:
    found: list[tuple[str, str | int]] = []
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        parts = line.split()  # Num RefCount Protocol Flags Type St Inode Path
        if len(parts) >= 8 and parts[6] in inodes and parts[5] == "01" and "weir" in parts[7]:
            found.append(("unix", parts[7]))
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        parts = line.split()  # sl local remote st ... uid timeout inode
        if parts[3] == "0A" and parts[9] in inodes and parts[1].startswith("0100007F:"):
            found.append(("tcp", int(parts[1].split(":")[1], 16)))
    return found
