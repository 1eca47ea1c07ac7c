"""``netio.Waker``, the wait of the job manager's monitor thread: it ends when a link has a
message (or was closed), when another thread wakes it (before or during the wait), or at its
timeout; a wake is not remembered past the wait it ended, and a link closed under the wait
ends it instead of raising."""

from __future__ import annotations

import threading
import time
from multiprocessing import Pipe

from weir.engine.runtime.netio import Waker


def test_a_wait_without_news_lasts_its_timeout() -> None:
    waker = Waker()
    ours, _theirs = Pipe()
    started = time.monotonic()
    assert waker.wait([ours], 0.15) is False
    assert time.monotonic() - started >= 0.14


def test_a_message_or_a_closed_link_ends_the_wait_at_once() -> None:
    waker = Waker()
    ours, theirs = Pipe()
    theirs.send_bytes(b"status")
    started = time.monotonic()
    assert waker.wait([ours], 10.0) is True
    assert time.monotonic() - started < 5.0
    assert ours.recv_bytes() == b"status"
    theirs.close()  # the worker is gone: its end reads EOF
    assert waker.wait([ours], 10.0) is True


def test_a_wake_from_another_thread_ends_the_wait_and_is_used_up() -> None:
    waker = Waker()
    ours, _theirs = Pipe()
    timer = threading.Timer(0.05, waker.wake)
    timer.start()
    started = time.monotonic()
    assert waker.wait([ours], 10.0) is True
    assert time.monotonic() - started < 5.0
    timer.join()
    for _ in range(1000):  # wakes before a wait: that wait ends at once, however many came
        waker.wake()
    assert waker.wait([ours], 10.0) is True
    assert waker.wait([ours], 0.05) is False  # the wakes were used up by the wait they ended


def test_a_link_closed_under_the_wait_ends_it_without_raising() -> None:
    waker = Waker()
    ours, _theirs = Pipe()
    ours.close()  # a kill or a restart closed it while the monitor was about to wait
    started = time.monotonic()
    assert waker.wait([ours], 0.1) is True
    assert time.monotonic() - started < 5.0
