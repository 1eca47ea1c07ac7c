"""The PNG figures ``make bench`` writes next to ``bench.json``, each from that run's results:
throughput against parallelism, throughput and freshness against the buffer timeout, the query
latency CDF, checkpoint durations, and weir beside Quix Streams."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def _figure(path: Path, title: str, size: tuple[float, float] = (7, 4)) -> Iterator[Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=size)
    try:
        yield ax
        ax.set_title(title)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)


def parallelism(result: dict[str, Any], path: Path) -> None:
    """Events/s at parallelism 1 and 2 for the file source (the ``kafka`` section measures
    p=1 against the bare client; ``peers`` has the Kafka source at p=1 and 2)."""
    rows: dict[str, list[float]] = {}
    par = result.get("parallel")
    if par:
        rows["JSONL files (2 splits)"] = [par["p1"]["events_per_s"], par["p2"]["events_per_s"]]
    with _figure(path, "weir: throughput against parallelism") as ax:
        for name, ys in rows.items():
            ax.plot([1, 2], [y / 1000 for y in ys], "o-", label=name)
        ax.set_xticks([1, 2])
        ax.set_xlabel("parallelism (worker processes; the machine has 2 cores)")
        ax.set_ylabel("k events/s")
        ax.set_ylim(bottom=0)
        ax.legend()


def buffer_timeout(rows: list[dict[str, Any]], path: Path) -> None:
    xs = [r["buffer_timeout_ms"] for r in rows]
    with _figure(path, "weir: throughput and freshness against the buffer timeout") as left:
        left.plot(xs, [r["events_per_s"] / 1000 for r in rows], "o-", color="tab:blue")
        left.set_xscale("symlog", linthresh=1)
        left.set_xlabel("buffer timeout (ms)")
        left.set_ylabel("throughput, parallelism 2 (k events/s)", color="tab:blue")
        right = left.twinx()
        right.plot(xs, [r["freshness_p99_ms"] for r in rows], "s--", color="tab:red")
        right.set_ylabel("freshness p99 (ms)", color="tab:red")


def query_cdf(queries: dict[str, Any], path: Path) -> None:
    """The mixed query load's latency CDF per request kind."""
    kinds = queries.get("mixed_load", {}).get("kinds", {})
    with _figure(path, "weir: query latency CDF (mixed load, 20 clients, job ingesting)") as ax:
        for kind, entry in kinds.items():
            qs = entry.get("quantiles_ms")
            if qs:
                ax.plot(qs, range(len(qs)), label=f"{kind} ({entry['ok']} requests)")
        ax.set_xscale("log")
        ax.set_xlabel("latency (ms)")
        ax.set_ylabel("percentile")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()


def checkpoints(sync_phase: dict[str, Any], path: Path) -> None:
    """Each checkpoint's synchronous and asynchronous parts while state grows to 1M keys."""
    each = sync_phase.get("each", [])
    with _figure(path, "weir: checkpoint durations, one worker, state growing to 1M keys") as ax:
        ids = [c["id"] for c in each]
        ax.plot(ids, [c["sync_ms"] for c in each], "o-", label="synchronous part (ms)")
        ax.plot(ids, [c["async_ms"] for c in each], "s--", label="asynchronous upload (ms)")
        ax.set_xlabel("checkpoint id (every 500 ms)")
        ax.set_ylabel("ms")
        ax.set_yscale("log")
        ax.legend()


def peers(peer: dict[str, Any], path: Path) -> None:
    """weir p1/p2, Quix Streams and the bare confluent-kafka client per key count."""
    names = [n for n in ("10k_keys", "1m_keys") if n in peer]
    series = {
        "Quix Streams 3.28 (partition closing)": [
            peer[n]["quix_streams"]["events_per_s"] for n in names
        ],
        "weir p=1": [peer[n]["weir"]["p1"]["events_per_s"] for n in names],
        "weir p=2": [peer[n]["weir"]["p2"]["events_per_s"] for n in names],
        "bare confluent-kafka consumer": [peer[n]["bare_confluent_events_per_s"] for n in names],
    }
    with _figure(path, "Kafka tumbling count+sum per key: weir beside Quix Streams") as ax:
        width = 0.8 / len(series)
        for i, (label, ys) in enumerate(series.items()):
            xs = [j + i * width for j in range(len(names))]
            ax.bar(xs, [y / 1000 for y in ys], width, label=label)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(names))])
        ax.set_xticklabels([n.replace("_", " ") for n in names])
        ax.set_ylabel("k events/s")
        ax.legend(fontsize=8)


def write_all(result: dict[str, Any], out: Path) -> list[str]:
    """Every figure the results allow; the file names written."""
    written = []
    if "parallel" in result:
        parallelism(result, out / "throughput_parallelism.png")
        written.append("throughput_parallelism.png")
    if "buffer_timeout" in result:
        buffer_timeout(result["buffer_timeout"], out / "buffer_timeout.png")
        written.append("buffer_timeout.png")
    if "queries" in result:
        query_cdf(result["queries"], out / "query_latency_cdf.png")
        written.append("query_latency_cdf.png")
    sync = result.get("checkpoints", {}).get("sync_phase_1m_keys")
    if sync and "each" in sync:
        checkpoints(sync, out / "checkpoint_durations.png")
        written.append("checkpoint_durations.png")
    if "peers" in result:
        peers(result["peers"], out / "peers.png")
        written.append("peers.png")
    return written
