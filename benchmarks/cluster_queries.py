"""Point-lookup latency of a cluster job's API (the driver routes each read to the task that
owns the key, ``control.statereader``) beside a local job's, for ``cluster_bench``: the same
lookups of keys owned by both workers against each, sequential and from several clients."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from benchmarks.freshness import percentile
from weir.state.keygroups import key_group, operator_for_key_group

MAX_PARALLELISM = 128


def _percentile(values: list[float], q: float) -> float:
    return round(percentile(values, q), 2)


def _lookup_keys(urls: dict[str, str], path: str, candidates: int = 200) -> list[str]:
    """Ids both jobs hold state for (the same answer from each), as many owned by worker 0 as
    by worker 1."""
    owned: dict[int, list[str]] = {0: [], 1: []}
    with httpx.Client(timeout=30) as client:
        for i in range(candidates):
            key = f"ad-{i}"
            answers = [client.get(f"{url}{path}{key}") for url in urls.values()]
            if any(a.status_code != 200 for a in answers):
                continue
            if answers[0].json()["windows"] != answers[1].json()["windows"]:
                raise RuntimeError(f"local and cluster disagree on {key}: {answers}")
            kg = key_group(key, MAX_PARALLELISM)
            owned[operator_for_key_group(MAX_PARALLELISM, 2, kg)].append(key)
    n = min(len(owned[0]), len(owned[1]))
    if n < 10:
        raise RuntimeError(f"too few keys with state on both workers: {owned}")
    return owned[0][:n] + owned[1][:n]


def _timed_lookups(url: str, path: str, keys: list[str]) -> list[float]:
    """Milliseconds of each lookup of ``keys``, in order, over one keep-alive connection."""
    took = []
    with httpx.Client(base_url=url, timeout=30) as client:
        for key in keys:
            t0 = time.perf_counter()
            r = client.get(f"{path}{key}")
            took.append((time.perf_counter() - t0) * 1000)
            if r.status_code != 200:
                raise RuntimeError(f"{url}: {key} answered {r.status_code} {r.text[:200]}")
    return took


def _concurrent_lookups(url: str, path: str, keys: list[str], clients: int) -> list[float]:
    parts = [keys[i::clients] for i in range(clients)]
    results: list[list[float]] = [[] for _ in parts]

    def one(i: int) -> None:
        results[i] = _timed_lookups(url, path, parts[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [ms for part in results for ms in part]


def measure(
    urls: dict[str, str], lookups: int, concurrency: int, job: str, op: str
) -> dict[str, Any]:
    """``urls``: ``local`` and ``cluster``, each serving a finished run of the same job. The
    same random sequence of ``lookups`` lookups of ``op``'s state against each, in halves
    ordered local, cluster, cluster, local (the host's drift falls on both)."""
    path = f"/{job}/{op}/state/"
    keys = _lookup_keys(urls, path)
    sequence = random.Random(19).choices(keys, k=lookups)
    halves = [sequence[: lookups // 2], sequence[lookups // 2 :]]
    out: dict[str, Any] = {"keys": len(keys), "lookups_per_side": lookups}
    patterns: dict[str, Callable[[str, list[str]], list[float]]] = {
        "sequential": lambda u, k: _timed_lookups(u, path, k),
        f"concurrent_{concurrency}": lambda u, k: _concurrent_lookups(u, path, k, concurrency),
    }
    for name, run in patterns.items():
        took: dict[str, list[float]] = {"local": [], "cluster": []}
        for half, mode in zip((0, 0, 1, 1), ("local", "cluster", "cluster", "local"), strict=True):
            took[mode] += run(urls[mode], halves[half])
        row = {
            f"{m}_{q}_ms": _percentile(v, p)
            for m, v in took.items()
            for q, p in (("p50", 0.5), ("p99", 0.99))
        }
        row["cluster_minus_local_p50_ms"] = round(row["cluster_p50_ms"] - row["local_p50_ms"], 2)
        row["cluster_minus_local_p99_ms"] = round(row["cluster_p99_ms"] - row["local_p99_ms"], 2)
        out[name] = row
    return out
