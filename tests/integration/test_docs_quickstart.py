"""The quickstart page (docs/getting-started/quickstart.md), run end to end as written.

The page includes its files (events, job, commands, expected outputs) with pymdownx.snippets;
this test runs those same files in an empty directory: ``run.sh`` (``weir run job.py``) on
loopback, ``query.sh`` (curl), ``query.py`` (the client), and the dashboard's page. The one
substitution is the port: the page's 8000 may be taken on a shared machine, so the run gets
``WEIR_API_PORT=0`` (a free port, printed in its ``serving on`` line) and the queries use it.
Each output must equal the page's expected output byte for byte.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import wait_until

PAGE_DIR = Path(__file__).resolve().parents[2] / "docs" / "getting-started"
FILES = PAGE_DIR / "quickstart"
PAGE = PAGE_DIR / "quickstart.md"
SERVING = re.compile(r"weir: job clicks serving on http://127\.0\.0\.1:(\d+)\n")
STARTED = re.compile(r"job=clicks started workers=(\d+)")
PAGE_PORT = "8000"


def _env(port: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEIR_")}
    # the reader's shell finds weir and python where pip installed them: this venv's bin
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["WEIR_API_PORT"] = port
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture
def quickstart(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[bytes], Path]]:
    """An empty directory with the page's two files, and ``run.sh`` running in it."""
    for name in ("events.jsonl", "job.py"):
        shutil.copy(FILES / name, tmp_path / name)
    log = tmp_path / "run.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["sh", str(FILES / "run.sh")],
            cwd=tmp_path,
            env=_env("0"),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield tmp_path, proc, log
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # the page's Ctrl-C
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def _ran_to_the_end(proc: subprocess.Popen[bytes], log: Path) -> str | None:
    text = log.read_text(errors="replace")
    assert proc.poll() is None, f"weir run exited with {proc.returncode}:\n{text}"
    started, port = STARTED.search(text), SERVING.search(text)
    if not (started and port):
        return None
    ended = text.count("reached the end of its input")
    return port.group(1) if ended == int(started.group(1)) else None


def test_the_quickstart_runs_as_written(
    quickstart: tuple[Path, subprocess.Popen[bytes], Path],
) -> None:
    here, proc, log = quickstart
    # the page's step 3: wait for the lines it shows, as a reader would
    port = wait_until(lambda: _ran_to_the_end(proc, log), 60, 0.1, "the end of the input")
    env = _env(port)

    curl = (FILES / "query.sh").read_text().replace(PAGE_PORT, port)
    assert f":{PAGE_PORT}/" in (FILES / "query.sh").read_text()  # the one substitution
    out = subprocess.run(
        ["sh", "-c", curl], cwd=here, env=env, capture_output=True, timeout=30, check=True
    )
    assert out.stdout.decode() == (FILES / "query.sh.out").read_text()

    script = here / "query.py"
    script.write_text((FILES / "query.py").read_text().replace(PAGE_PORT, port))
    out = subprocess.run(
        ["python", "query.py"], cwd=here, env=env, capture_output=True, timeout=30, check=True
    )
    assert out.stdout.decode() == (FILES / "query.py.out").read_text()

    # the page's step 6: the dashboard
    page = httpx.get(f"http://127.0.0.1:{port}/", timeout=10, trust_env=False)
    assert page.status_code == 200 and "<html" in page.text.lower()


def test_the_page_includes_every_file_the_test_runs() -> None:
    text = PAGE.read_text()
    for name in (
        "events.jsonl",
        "job.py",
        "run.sh",
        "query.sh",
        "query.sh.out",
        "query.py",
        "query.py.out",
    ):
        assert f'--8<-- "getting-started/quickstart/{name}"' in text, name
    # the job is the "10-line job" the page promises
    assert len((FILES / "job.py").read_text().splitlines()) <= 10
