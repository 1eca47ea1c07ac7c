"""What only a fresh interpreter shows: a key group that does not move with Python's hash seed,
glibc's mmap threshold fixed at a process's start, and ``weir.client`` importing without the
server's stack. Each test runs ``python -c`` (so it is not in the fast tier, which starts no
process)."""

from __future__ import annotations

import subprocess
import sys
import zlib
from pathlib import Path


def test_large_blocks_stay_mapped_after_a_larger_one_was_freed() -> None:
    """Without a fixed threshold, freeing a 16 MiB block would raise glibc's threshold to 16
    MiB and the 2 MiB block would come from the heap. Run in a fresh interpreter, as weir's
    processes call it at their start: in this one, chunks other tests freed would serve the
    2 MiB block from the heap whatever the threshold."""
    code = """
from tests.unit.test_heap import _libc
from weir.engine.runtime import heap
libc = _libc()
assert heap.fix_mmap_threshold(), "this is glibc: mallopt must be found"
libc.free(libc.malloc(16 * 2**20))
before = libc.mallinfo2().hblkhd
block = libc.malloc(2 * 2**20)
mapped = libc.mallinfo2().hblkhd - before
libc.free(block)
print(mapped, libc.mallinfo2().hblkhd - before)
"""
    mapped, left = map(int, _fresh(code).split())
    assert mapped >= 2 * 2**20, f"the 2 MiB block is not mapped ({mapped} bytes more mapped)"
    assert left == 0, "freeing it did not unmap it"


def test_the_heap_top_is_kept_between_trims() -> None:
    """Fixing the mmap threshold also fixed glibc's trim threshold at 128 KiB: each free at the
    heap's top gave its pages back, and the next allocations faulted them in again (a worker
    at 1M keys spent ~8% of its CPU so). Now the top is kept up to ``heap.TRIM_THRESHOLD`` for
    the background trimmer to hand back. Blocks of 256 KiB are below the mmap threshold: they
    come from the main heap."""
    code = """
from tests.unit.test_heap import _libc
from weir.engine.runtime import heap
libc = _libc()
assert heap.fix_mmap_threshold(), "this is glibc: mallopt must be found"
base = libc.mallinfo2().arena
blocks = [libc.malloc(256 * 1024) for _ in range(32)]
grown = libc.mallinfo2().arena
for b in reversed(blocks):
    libc.free(b)
print(grown - base, grown - libc.mallinfo2().arena)
"""
    grown, given_back = map(int, _fresh(code).split())
    assert grown >= 6 * 2**20, f"the 8 MiB did not come from the heap ({grown} bytes)"
    assert given_back == 0, f"free() shrank the heap by {given_back} bytes"


def _fresh(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=Path(__file__).parents[2],  # the repository root: `tests` is importable
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_key_group_does_not_depend_on_python_hash_seed() -> None:
    code = "from weir.state.keygroups import key_group; print(key_group('ad-42', 128))"
    seen = set()
    for seed in ("1", "2", "random"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        seen.add(int(out.stdout))
    assert seen == {zlib.crc32(b"ad-42") % 128}


def test_the_client_imports_without_the_servers_stack() -> None:
    """A dashboard script or a notebook that only queries should not load FastAPI, Starlette,
    uvicorn or the registry: ``weir.client`` must import on its own."""
    probe = (
        "import sys, weir.client; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('fastapi', 'starlette', 'uvicorn', 'pyspark') or m.startswith('weir.api.app')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]", out.stdout


def test_exit_now_does_what_the_teardown_does_that_matters(tmp_path: Path) -> None:
    """``weir`` ends without the interpreter's teardown, but a thread that is not a daemon
    still finishes, ``atexit`` handlers run, buffered output is written, and the status is
    the command's."""
    code = f"""
import atexit, sys, threading, time
from weir.app.startup import exit_now
out = {str(tmp_path)!r}
def late():
    time.sleep(0.2)
    open(out + "/thread", "w").write("done")
threading.Thread(target=late).start()
atexit.register(lambda: open(out + "/atexit", "w").write("ran"))
sys.stdout.write("buffered")
exit_now(3)
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout == "buffered"
    assert (tmp_path / "thread").read_text() == "done"
    assert (tmp_path / "atexit").read_text() == "ran"
