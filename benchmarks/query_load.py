"""A query load for a running weir API: point lookups, batch lookups, top-N and SSE streams,
mixed by weight, from async httpx clients; prints latency percentiles per kind as JSON.

    python -m benchmarks.query_load --url http://127.0.0.1:8000 --job ad-stats --op impressions \\
        --by count --keys 1000 --seconds 10 --connections 20 --mix point=70,batch=10,top=15,sse=5

It targets loopback only (``--allow-remote`` to say otherwise), stops after ``--seconds`` or
``--requests``, whichever comes first, and prints progress to stderr every second. An SSE
"request" is one stream, read until its first event (the latency) and closed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

KINDS = ("point", "batch", "top", "sse")


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    statuses: dict[int, int] = field(default_factory=lambda: defaultdict(int))

    def done(self) -> int:
        return sum(len(v) for v in self.latencies.values()) + sum(self.errors.values())


def parse_mix(raw: str) -> dict[str, int]:
    mix: dict[str, int] = {}
    for part in raw.split(","):
        name, _, weight = part.partition("=")
        if name not in KINDS or not weight.isdigit():
            raise SystemExit(f"--mix {raw!r}: use kind=weight pairs of {', '.join(KINDS)}")
        mix[name] = int(weight)
    if not sum(mix.values()):
        raise SystemExit("--mix needs a positive weight")
    return mix


async def _one(
    client: httpx.AsyncClient, kind: str, args: argparse.Namespace, rng: random.Random
) -> int:
    base = f"/{args.job}/{args.op}"
    key = f"{args.key_prefix}{rng.randrange(args.keys)}"
    if kind == "point":
        r = await client.get(f"{base}/state/{key}", params={"limit": 10})
    elif kind == "batch":
        keys = [f"{args.key_prefix}{rng.randrange(args.keys)}" for _ in range(args.batch)]
        r = await client.post(f"{base}/lookup", json={"keys": keys, "limit": 10})
    elif kind == "top":
        r = await client.get(f"{base}/top", params={"by": args.by, "n": 10})
    else:
        async with client.stream("GET", f"{base}/state/{key}/stream") as s:
            if s.status_code != 200:
                return s.status_code
            async for line in s.aiter_lines():
                if line.startswith("data:") or line.startswith("event:"):
                    break
            return 200
    return r.status_code


async def run(args: argparse.Namespace) -> dict[str, Any]:
    mix = parse_mix(args.mix)
    kinds, weights = list(mix), list(mix.values())
    tally = Tally()
    stop_at = time.monotonic() + args.seconds
    limits = httpx.Limits(max_connections=args.connections)
    async with httpx.AsyncClient(
        base_url=args.url, limits=limits, timeout=args.timeout, trust_env=False
    ) as client:

        async def worker(seed: int) -> None:
            rng = random.Random(seed)
            while time.monotonic() < stop_at and tally.done() < args.requests:
                kind = rng.choices(kinds, weights)[0]
                t0 = time.perf_counter()
                try:
                    status = await _one(client, kind, args, rng)
                except httpx.HTTPError:
                    tally.errors[kind] += 1
                    continue
                tally.statuses[status] += 1
                if status >= 500 or status in (401, 422):
                    tally.errors[kind] += 1
                else:  # a 404 for a key without windows is an answer too
                    tally.latencies[kind].append(time.perf_counter() - t0)

        async def progress() -> None:
            while time.monotonic() < stop_at and tally.done() < args.requests:
                await asyncio.sleep(1.0)
                left = max(0.0, stop_at - time.monotonic())
                print(f"query_load: {tally.done()} requests, {left:.0f} s left", file=sys.stderr)

        t0 = time.monotonic()
        reporter = asyncio.create_task(progress())
        await asyncio.gather(*(worker(i) for i in range(args.connections)))
        reporter.cancel()
        elapsed = time.monotonic() - t0
    out: dict[str, Any] = {
        "seconds": round(elapsed, 2),
        "requests_per_s": round(tally.done() / elapsed, 1),
        "statuses": dict(sorted(tally.statuses.items())),
        "kinds": {},
    }
    for kind in kinds:
        lat = sorted(tally.latencies[kind])
        entry: dict[str, Any] = {"ok": len(lat), "errors": tally.errors[kind]}
        for q in (0.5, 0.9, 0.99):
            if lat:
                entry[f"p{int(q * 100)}_ms"] = round(
                    lat[min(len(lat) - 1, int(q * len(lat)))] * 1000, 2
                )
        if getattr(args, "quantiles", False) and lat:  # 101 points: the latency CDF
            entry["quantiles_ms"] = [
                round(lat[min(len(lat) - 1, int(q / 100 * len(lat)))] * 1000, 3) for q in range(101)
            ]
        out["kinds"][kind] = entry
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--job", default="ad-stats")
    p.add_argument("--op", default="impressions")
    p.add_argument("--by", default="count", help="aggregate for top-N")
    p.add_argument("--keys", type=int, default=1000)
    p.add_argument("--key-prefix", default="ad-")
    p.add_argument("--batch", type=int, default=20, help="keys per batch lookup")
    p.add_argument("--mix", default="point=70,batch=10,top=15,sse=5")
    p.add_argument("--connections", type=int, default=20)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--requests", type=int, default=100_000)
    p.add_argument("--timeout", type=float, default=10.0)
    p.add_argument("--allow-remote", action="store_true", help="load a non-loopback host")
    args = p.parse_args(argv)
    host = urlsplit(args.url).hostname or ""
    if host not in ("127.0.0.1", "localhost", "::1") and not args.allow_remote:
        raise SystemExit(f"--url {args.url}: loads target loopback only; pass --allow-remote")
    print(json.dumps(asyncio.run(run(args)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
