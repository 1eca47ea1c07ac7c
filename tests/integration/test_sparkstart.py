"""Ctrl-C while a SparkSession starts (``engine.runtime.control.sparkstart``): the JVM it
launched is gone before the command says it was interrupted, so that line ends the output."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from tests.support import wait_until

# A stand-in for PySpark's JVM: a child writing start-up lines to the stderr it inherits until
# it is killed, while the builder waits on it as PySpark waits on the JVM's Py4J answers.
SCRIPT = r"""
import signal, subprocess, sys, time
from weir.engine.runtime.control.sparkstart import get_or_create

CHATTER = "import os\nline = b'jvm %d\\n' % os.getpid()\nwhile True:\n    os.write(2, line)"

class Builder:
    def getOrCreate(self):
        subprocess.Popen([sys.executable, "-c", CHATTER]).wait()
        raise RuntimeError("the JVM is gone")

def said(signum, frame):  # what weir's own handler does: one line, then the interrupt
    print("weir: interrupted (Ctrl-C)", file=sys.stderr, flush=True)
    time.sleep(0.05)  # a busy machine: whatever still runs gets its turn before the interrupt
    raise KeyboardInterrupt

signal.signal(signal.SIGINT, said)
try:
    get_or_create(Builder())
except KeyboardInterrupt:
    sys.exit(130)
"""


def test_the_interrupted_line_comes_after_the_last_line_of_the_jvm(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT],
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert proc.stderr is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr or ()), daemon=True)
    reader.start()
    try:
        wait_until(lambda: len(lines) > 0, 30, what="the stand-in JVM writing")
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(30) == 130
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    reader.join(10)
    rest = [line.rstrip("\n") for line in lines]
    assert rest[-1] == "weir: interrupted (Ctrl-C)", rest[-5:]
    assert rest.count("weir: interrupted (Ctrl-C)") == 1
    jvm = int(rest[0].split()[1])
    wait_until(lambda: not Path(f"/proc/{jvm}").exists(), 10, what="the stand-in JVM gone")
