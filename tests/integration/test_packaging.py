"""The package as pip builds it: the distribution ``weir-stream`` (the PyPI name ``weir`` is an
unrelated project), whose wheel holds ``weir/`` and its dist-info and nothing else; its metadata
carries the SPDX license, version ranges, a lean core and the extras ``kafka``, ``s3``, ``sql``,
``spark`` and ``all``; ``weir --version`` is the installed package's version.

The wheel is built from the files the Dockerfile copies into the image, so the image's build
has everything the package needs (a file missing there fails here first)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from email.parser import Parser
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.support import WEIR

ROOT = Path(__file__).resolve().parents[2]
DIST = "weir-stream"


def _dockerfile_sources() -> list[str]:
    sources: list[str] = []
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY ") and "--from=" not in line:  # not the build stage's wheel
            sources += line.split()[1:-1]
    return sources


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    src = tmp_path_factory.mktemp("src")
    for name in _dockerfile_sources():
        if (ROOT / name).is_dir():  # weir/'s links to app/, engine/, ... stay links
            skip = shutil.ignore_patterns("__pycache__")
            shutil.copytree(ROOT / name, src / name, symlinks=True, ignore=skip)
        else:
            shutil.copy2(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("wheel")
    # no isolated build env (pip would fetch and install setuptools and Cython into one, a
    # minute here): this environment's own satisfy [build-system] (the next test checks); the
    # kernels at -O0, since only the wheel's contents are checked here (a third of -O3's CPU)
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
         "-w", str(out), str(src)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "WEIR_KERNEL_CFLAGS": "-O0"},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    (built,) = out.glob("weir_stream-*.whl")
    return zipfile.ZipFile(built)


def test_this_environment_satisfies_the_build_systems_requirements() -> None:
    """The wheel above is built without an isolated env, so with these versions."""
    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]
    assert build["build-backend"] == "setuptools.build_meta"
    for spec in build["requires"]:
        req = Requirement(spec)
        assert req.specifier.contains(version(req.name)), (spec, version(req.name))


def test_the_wheel_holds_weir_and_its_dist_info_only(wheel: zipfile.ZipFile) -> None:
    names = wheel.namelist()
    dist = f"weir_stream-{version(DIST)}.dist-info"
    assert {n.split("/")[0] for n in names} == {"weir", dist}
    for module in ("__init__.py", "app/cli.py", "engine/job.py", "state/rocksdb.py",
                   "api/dashboard.html", "engine/spark/backfill.py", "py.typed"):  # fmt: skip
        assert f"weir/{module}" in names, module
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/")) or "__pycache__" in n]


def test_the_wheel_holds_the_compiled_kernels(wheel: zipfile.ZipFile) -> None:
    names = wheel.namelist()
    for kernel in ("_scan", "_timek", "_intern", "_fold", "_strk", "_recs", "_cellk"):
        built = [
            n for n in names if n.startswith(f"weir/engine/kernels/{kernel}.") and n.endswith(".so")
        ]
        assert len(built) == 1, (kernel, built)
        assert f"weir/engine/kernels/{kernel[1:]}.py" in names  # its pure-Python twin
    assert not [n for n in names if n.endswith(".c")]  # Cython's output is rebuilt, not shipped


def test_the_wheel_metadata(wheel: zipfile.ZipFile) -> None:
    dist = f"weir_stream-{version(DIST)}.dist-info"
    meta = Parser().parsestr(wheel.read(f"{dist}/METADATA").decode())
    assert meta["Name"] == DIST
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta["License-File"] == "LICENSE"
    assert wheel.read(f"{dist}/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
    assert (ROOT / "LICENSE").read_text().split()[:4] == ["Apache", "License", "Version", "2.0,"]
    requires = meta.get_all("Requires-Dist")
    assert requires and not [r for r in requires if "==" in r.split(";")[0]]  # pins: constraints
    spark = [r for r in requires if r.startswith("pyspark")]
    assert spark == ['pyspark[sql]>=4.3.0; extra == "spark"']
    assert {"kafka", "s3", "sql", "spark", "all"} <= set(meta.get_all("Provides-Extra"))
    core = sorted(r.split(">")[0] for r in requires if "extra ==" not in r)
    assert core == [
        "fastapi", "fastapi-offline", "httpx", "httpx-sse", "msgpack", "numpy", "orjson",
        "prometheus-client", "pyarrow", "rocksdict", "uvicorn",
    ]  # fmt: skip
    by_extra = {
        "kafka": ["confluent-kafka", "crc32c", "kafka-python"],
        "s3": ["obstore"],
        "sql": ["sqlglot"],
    }
    for extra, names in by_extra.items():
        marker = f'extra == "{extra}"'
        assert sorted(r.split(">")[0] for r in requires if r.endswith(marker)) == names
    entry = wheel.read(f"{dist}/entry_points.txt").decode()
    assert "weir = weir.app.cli:command" in entry


def test_version_is_the_installed_package_version() -> None:
    for command in (WEIR, [sys.executable, "-m", "weir"]):
        r = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert r.stdout == f"weir {version(DIST)}\n"
