"""Which S3 client checkpoint storage uses, by measurement (issue 18): obstore (weir's client)
beside boto3 on the same S3-compatible server on loopback (SeaweedFS, ``loadtest/s3_server.py``).

Each round, both clients in turn (the first alternating): one 64 MiB file put (multipart, 8 MiB
parts, 4 at a time: the settings ``state/objectstore.py`` uses) and got back to a file; 200
files of 1 MiB put 4 at a time (``UPLOADS`` in ``state/checkpoints.py``); 1000 keys listed.
Medians of the rounds and boto3/obstore ratios of them (above 1: obstore is faster).

A one-off measurement, not part of ``make bench``: boto3 is not a dependency of weir. Run it
with ``python -m loadtest.s3_clients`` after ``pip install boto3``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from loadtest.s3_server import BUCKET, S3Server

MIB = 1 << 20
PART = 8 * MIB
PARALLEL = 4


class Client(Protocol):
    def put_file(self, key: str, src: Path) -> None: ...

    def get_file(self, key: str, dst: Path) -> None: ...

    def put_bytes(self, key: str, data: bytes) -> None: ...

    def list_keys(self, prefix: str) -> int: ...


class Obstore:
    """As ``state/objectstore.py`` calls it."""

    def __init__(self, server: S3Server) -> None:
        from obstore.store import S3Store

        env = server.env
        self.store = S3Store(
            BUCKET,
            endpoint=env["AWS_ENDPOINT_URL"],
            access_key_id=env["AWS_ACCESS_KEY_ID"],
            secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            region=env["AWS_REGION"],
            virtual_hosted_style_request=False,
            client_options={"allow_http": True},
        )

    def put_file(self, key: str, src: Path) -> None:
        import obstore

        big = src.stat().st_size > 16 * MIB
        obstore.put(
            self.store, key, src, use_multipart=big, chunk_size=PART, max_concurrency=PARALLEL
        )

    def get_file(self, key: str, dst: Path) -> None:
        import obstore

        with open(dst, "wb") as out:
            for chunk in obstore.get(self.store, key).stream(8 * MIB):
                out.write(chunk)

    def put_bytes(self, key: str, data: bytes) -> None:
        import obstore

        obstore.put(self.store, key, data, use_multipart=False)

    def list_keys(self, prefix: str) -> int:
        import obstore

        return sum(len(chunk) for chunk in obstore.list(self.store, prefix=prefix))


class Boto3:
    """boto3's managed transfers with the same part size and concurrency."""

    def __init__(self, server: S3Server) -> None:
        # imported by name: boto3 is no dependency of weir, so mypy has no stubs for it
        boto3 = importlib.import_module("boto3")
        transfer = importlib.import_module("boto3.s3.transfer")
        config = importlib.import_module("botocore.config")
        env = server.env
        self.s3 = boto3.client(
            "s3",
            endpoint_url=env["AWS_ENDPOINT_URL"],
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            region_name=env["AWS_REGION"],
            config=config.Config(
                s3={"addressing_style": "path"}, max_pool_connections=PARALLEL * 4
            ),
        )
        self.transfer = transfer.TransferConfig(
            multipart_threshold=16 * MIB, multipart_chunksize=PART, max_concurrency=PARALLEL
        )

    def put_file(self, key: str, src: Path) -> None:
        self.s3.upload_file(str(src), BUCKET, key, Config=self.transfer)

    def get_file(self, key: str, dst: Path) -> None:
        self.s3.download_file(BUCKET, key, str(dst), Config=self.transfer)

    def put_bytes(self, key: str, data: bytes) -> None:
        self.s3.put_object(Bucket=BUCKET, Key=key, Body=data)

    def list_keys(self, prefix: str) -> int:
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        return sum(page.get("KeyCount", 0) for page in pages)


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _many(client: Client, prefix: str, files: list[Path]) -> None:
    with ThreadPoolExecutor(PARALLEL) as pool:
        list(pool.map(lambda f: client.put_file(f"{prefix}/{f.name}", f), files))


def one_round(
    name: str, client: Client, r: int, inputs: dict[str, Any], scratch: Path
) -> dict[str, float]:
    base = f"clients/{name}/{r}"
    got = scratch / f"{name}-{r}.bin"
    out = {
        "put_64mib_s": _timed(lambda: client.put_file(f"{base}/big", inputs["big"])),
        "get_64mib_s": _timed(lambda: client.get_file(f"{base}/big", got)),
        "put_200x1mib_s": _timed(lambda: _many(client, f"{base}/many", inputs["small"])),
        "list_1000_s": _timed(lambda: _check(client.list_keys(f"{inputs['listed']}/"), 1000)),
    }
    if got.stat().st_size != inputs["big"].stat().st_size:
        raise RuntimeError(f"{name} got {got.stat().st_size} bytes back, not 64 MiB")
    got.unlink()
    return out


def _check(found: int, expected: int) -> None:
    if found != expected:
        raise RuntimeError(f"listed {found} keys, expected {expected}")


def _inputs(scratch: Path, client: Client) -> dict[str, Any]:
    big = scratch / "big.bin"
    big.write_bytes(os.urandom(64 * MIB))
    small = []
    for i in range(200):
        f = scratch / f"small-{i:03d}.bin"
        f.write_bytes(os.urandom(MIB))
        small.append(f)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: client.put_bytes(f"clients/listed/{i:04d}", b"x"), range(1000)))
    return {"big": big, "small": small, "listed": "clients/listed"}


def measure(server: S3Server, scratch: Path, rounds: int) -> dict[str, Any]:
    clients: dict[str, Client] = {"obstore": Obstore(server), "boto3": Boto3(server)}
    inputs = _inputs(scratch, clients["obstore"])
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in clients}
    for r in range(rounds):
        order = list(clients) if r % 2 == 0 else list(reversed(clients))
        for name in order:
            runs[name].append(one_round(name, clients[name], r, inputs, scratch))
    medians = {
        name: {op: round(statistics.median(x[op] for x in rows), 3) for op in rows[0]}
        for name, rows in runs.items()
    }
    return {
        "rounds": rounds,
        "median_s": medians,
        "boto3_over_obstore": {
            op: round(medians["boto3"][op] / medians["obstore"][op], 2) for op in medians["boto3"]
        },
        "each_s": {
            n: [{k: round(v, 3) for k, v in x.items()} for x in rows] for n, rows in runs.items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if importlib.util.find_spec("boto3") is None:
        raise SystemExit("boto3 is not installed (weir does not depend on it): pip install boto3")
    workdir = Path(tempfile.mkdtemp(prefix="weir-s3-clients-"))
    server = S3Server(workdir / "seaweedfs")
    server.start()
    try:
        print(json.dumps(measure(server, workdir, args.rounds), indent=2))
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
