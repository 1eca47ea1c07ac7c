"""Starting a SparkSession with Ctrl-C held until it exists.

PySpark starts its JVM with SIGINT ignored and waits for it to write its port to a temporary
file. A Ctrl-C in that wait removes the file's directory under the JVM, which then dies with a
Java stack trace on the terminal, and Py4J logs any call it interrupts with a Python one. Held
until ``getOrCreate`` returns, the interrupt instead stops the new session and is raised then:
the command ends with its own line.
"""

from __future__ import annotations

import signal
import threading
from typing import Any


def get_or_create(builder: Any) -> Any:
    """``builder.getOrCreate()``; a Ctrl-C meanwhile stops the session once it exists and is
    raised as ``KeyboardInterrupt``. The SIGINT handler in place before is put back (PySpark's
    context installs its own, which cancels every job)."""
    if threading.current_thread() is not threading.main_thread():
        return builder.getOrCreate()  # signals reach only the main thread
    pressed: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: pressed.append(signum))
    try:
        session = builder.getOrCreate()
    finally:
        signal.signal(signal.SIGINT, previous)
    if pressed:
        session.stop()
        raise KeyboardInterrupt
    return session
