"""Query retention: a window stays queryable until ``end - 1 + lateness + retention`` is
reached by the last watermark that data produced (not the end-of-input mark), so a finished job
still serves its recent windows and none of its old ones."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from tests.support import WeirServer, event_lines, write_lines
from tests.support.reference import Spec, simulate

SPEC = Spec(bound=100, size=1_000, lateness=500)
RETENTION_MS = 5_000


def test_finished_job_serves_only_retained_windows(
    tmp_path: Path, write_job: Callable[..., Path], weir_server: Callable[..., WeirServer]
) -> None:
    rng = random.Random(3)
    events = []
    for t in range(0, 100_000, 25):  # 100 s of event time, 4 000 events
        key = "early" if t < 20_000 and rng.random() < 0.5 else rng.choice(["steady", "s/lash"])
        ts = t - rng.randint(0, 80)
        events.append({"id": key, "event": "impression", "ts": ts, "value": rng.randint(0, 9)})
    lines = event_lines(events)
    ref = simulate(lines, SPEC)
    retained = ref.state_by_key(RETENTION_MS)
    everything = ref.state_by_key()
    assert "early" in everything and "early" not in retained
    assert len(retained["steady"]) == 6  # ends 95_000 .. 100_000: 95_000 - 1 + 500 + 5_000 > wm
    assert len(everything["steady"]) > 90

    src = write_lines(tmp_path / "in.jsonl", lines)
    job = write_job(src, bound=SPEC.bound, size=SPEC.size, lateness=SPEC.lateness)
    server = weir_server(job, "--state-retention-ms", str(RETENTION_MS))
    server.wait_finished()
    client = server.client()

    r = client.get("/t1/imps/state/early")
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "key_not_found"
    # the 404 says the key may have aged out, with the operator's horizon in event time: the
    # data watermark (the newest ts - bound - 1, as Flink's) - lateness - retention + 1
    message = r.json()["error"]["message"]
    horizon = max(e["ts"] for e in events) - SPEC.bound - 1 - SPEC.lateness - RETENTION_MS + 1
    assert "aged out" in message and f"at or before {horizon} (" in message, message
    assert f"--state-retention-ms={RETENTION_MS}" in message, message
    # the end of the run said how many windows retention dropped
    dropped = [
        line for line in server.stderr().splitlines() if "retention dropped windows=" in line
    ]
    assert len(dropped) == 1 and "WARNING" in dropped[0] and "op=imps" in dropped[0], dropped
    for key in ("steady", "s/lash"):
        body = client.get(f"/t1/imps/state/{quote(key, safe='')}").json()
        assert body["windows"] == retained[key], key
        assert body["windows"][0]["start"] > everything[key][0]["start"]


def test_zero_retention_keeps_windows_until_lateness_passes(
    tmp_path: Path, write_job: Callable[..., Path], weir_server: Callable[..., WeirServer]
) -> None:
    """With retention 0 only windows that can still change (within lateness of the last data
    watermark) stay queryable."""
    spec = Spec(bound=0, size=100, lateness=250)
    events = [{"id": "k", "event": "impression", "ts": t, "value": 1} for t in range(0, 1_000, 10)]
    lines = event_lines(events)
    ref = simulate(lines, spec)
    retained = ref.state_by_key(0)["k"]
    # data watermark 989: windows with end - 1 + 250 > 989 are [700,800), [800,900), [900,1000)
    assert [w["start"] for w in retained] == [700, 800, 900]

    src = write_lines(tmp_path / "in.jsonl", lines)
    job = write_job(src, bound=spec.bound, size=spec.size, lateness=spec.lateness)
    server = weir_server(job, "--state-retention-ms", "0")
    server.wait_finished()
    assert server.client().get("/t1/imps/state/k").json()["windows"] == retained
