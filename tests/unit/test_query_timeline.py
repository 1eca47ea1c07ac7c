"""``benchmarks.query_timeline``'s report: the rate and percentiles of every request, and the
slices that held a slow one with the CPU each process used in them."""

from __future__ import annotations

from benchmarks.query_timeline import SLICE_S, _report


def test_a_slow_slice_is_listed_with_the_cpu_used_in_it() -> None:
    t0 = 100.0
    # 200 requests of 10 ms over the first second; one of 90 ms ends at 0.6 s
    done = [(t0 + i * 0.005, 0.010) for i in range(200)]
    done.append((t0 + 0.6, 0.090))
    samples = [
        (t0 + 0.1 * i, {"api": 0.02 * i, "worker": 0.005 * i}) for i in range(11)
    ]  # the API used a core's fifth, the worker a twentieth
    out = _report(t0, 1.0, done, {200: 201}, samples, slow_ms=40.0)
    assert out["requests"] == 201 and out["requests_per_s"] == 201
    assert out["p50_ms"] == 10.0 and out["p99_ms"] == 10.0  # one slow request in 201
    assert out["statuses"] == {"200": 201}
    [slow] = out["slow_slices"]
    assert slow["at_s"] == 2 * SLICE_S  # 0.6 s falls in the third 250 ms slice
    assert slow["slowest_ms"] == 90.0 and slow["median_ms"] == 10.0
    assert slow["requests"] == 51  # 50 of 10 ms in the slice, and the slow one
    # three 100 ms samples end in that slice (at 0.5, 0.6 and 0.7 s)
    assert slow["cpu_s"] == {"api": 0.06, "worker": 0.015}


def test_no_request_no_percentile() -> None:
    out = _report(0.0, 1.0, [], {}, [], slow_ms=40.0)
    assert out["requests"] == 0 and out["p50_ms"] is None and out["slow_slices"] == []
