"""The process-function example (app/examples/fire_detection.py) on a scripted input: exactly
the expected warnings, at 1 and 2 workers, and its per-sensor state over HTTP."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.support import WeirResult, WeirServer, read_jsonl, write_events

EXAMPLE = Path(__file__).resolve().parents[2] / "app" / "examples" / "fire_detection.py"

READINGS = {
    # hot from 1000 through the 10 s span (the cool reading at 13000 is after the deadline,
    # and arrives before the watermark reaches it): one warning at 11000
    "s1": [(0, 50), (1000, 65), (5000, 70), (9000, 75), (12000, 80), (13000, 40), (20000, 30)],
    # cools within the span, twice: no warning
    "s2": [(0, 70), (4000, 50), (6000, 90), (14000, 95), (15000, 20)],
    # hot from 2000: a warning at 12000
    "s3": [(2000, 61), (7000, 99), (22000, 40)],
}
EXPECTED = [
    {"sensor": "s1", "hot_since": 1000, "warned_at": 11000},
    {"sensor": "s3", "hot_since": 2000, "warned_at": 12000},
]


def _events() -> list[dict[str, object]]:
    evs = [
        {"sensor": s, "ts": t, "temperature": float(temp)}
        for s, rows in READINGS.items()
        for t, temp in rows
    ]
    return sorted(evs, key=lambda e: (e["ts"], e["sensor"]))  # type: ignore[return-value]


@pytest.mark.parametrize("parallelism", ["1", "2"])
def test_fire_detection_emits_exactly_the_expected_warnings(
    tmp_path: Path, run_weir: Callable[..., WeirResult], parallelism: str
) -> None:
    src = write_events(tmp_path / "readings.jsonl", _events())
    out = tmp_path / "warnings.jsonl"
    result = run_weir(
        "run", str(EXAMPLE), "--source", f"file://{src}", "--sink", f"file://{out}",
        "--exit-at-end", "--api-port", "0", "--state-dir", str(tmp_path / "st"),
        "--parallelism", parallelism,
    )  # fmt: skip
    assert result.rc == 0, result.stderr
    assert sorted(read_jsonl(out), key=lambda w: str(w["sensor"])) == EXPECTED
    assert read_jsonl(tmp_path / "st" / "fire-detection" / "dead-letter.jsonl") == []


def test_fire_detection_state_is_queryable(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    src = write_events(tmp_path / "readings.jsonl", _events())
    server = weir_server(EXAMPLE, "--source", f"file://{src}", "--parallelism", "2")
    server.wait_finished()
    client = server.client()
    for sensor in ("s1", "s3"):
        body = client.get(f"/fire-detection/fires/state/{quote(sensor)}").json()
        assert body["state"] == {"warnings": 1}, body
        assert body["windows"] == []
    r = client.get("/fire-detection/fires/state/s2")  # every state of s2 was cleared
    assert r.status_code == 404 and r.json()["error"]["code"] == "key_not_found"
    detail = client.get("/jobs/fire-detection").json()
    assert detail["operators"][0]["type"] == "process"
    assert detail["operators"][0]["results_out"] == 2
