"""Write ``savepoint.tar.gz``: a savepoint taken by weir before state format 2, for
``tests/integration/test_format1_restore.py``. Run it with that release's code, never this one:

    git archive <commit before format 2> | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old WEIR_KERNELS=python .venv/bin/python \
        tests/integration/format1/make_fixture.py tests/integration/format1

The archive holds the input (``in.jsonl``, which the job names relative to its working
directory, as split positions are kept by that name), the savepoint (``t1/chk-<n>/`` and the
SST files it shares, ``t1/shared/``: a stop-with-savepoint copied with ``--savepoint-dir``),
what the first run emitted before it (``out.jsonl``, ``late.jsonl``) and ``made.json`` (the
commit whose weir wrote it, the savepoint's name).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from tests.support import WEIR, event_lines, job_text, make_events, wait_until, write_lines
from tests.support.reference import Spec

SPEC = Spec(bound=200, size=1_000, lateness=1_500)
N_EVENTS = 6_000
SLOW = (
    ("filter", "lambda e: __import__('time').sleep(0.001) is None and e['event'] == 'impression'"),
)


def main(dest: Path) -> None:
    import httpx

    import weir.state.layout as layout

    assert not hasattr(layout, "FORMAT_KEY"), "run this with the code of a release before format 2"
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        src = write_lines(tmp / "in.jsonl", event_lines(make_events(N_EVENTS, seed=38)))
        job = tmp / "job.py"
        job.write_text(
            job_text(
                Path(src.name), bound=SPEC.bound, size=SPEC.size, lateness=SPEC.lateness, steps=SLOW
            )
        )
        state, copies, out = tmp / "state", tmp / "copies", tmp / "out.jsonl"
        argv = [
            *WEIR,
            "run",
            str(job),
            "--api-port",
            "0",
            "--state-dir",
            str(state),
            "--sink",
            f"file://{out}",
            "--parallelism",
            "2",
            "--batch-size",
            "64",
        ]
        log = (tmp / "run.log").open("w")
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=tmp
        )
        try:
            url = wait_until(lambda: _url(tmp / "run.log"), 60.0, what="serving")
            wait_until(
                lambda: httpx.get(f"{url}/jobs/t1").json()["records_in"] >= 1_500,
                60.0,
                what="a quarter of the input read",
            )
            r = subprocess.run(
                [
                    *WEIR,
                    "stop",
                    "t1",
                    "--savepoint",
                    "--savepoint-dir",
                    str(copies),
                    "--state-dir",
                    str(state),
                    "--json",
                ],
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            )
            answer = json.loads(r.stdout)
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
        sp = Path(answer["savepoint"]["path"])
        pack = tmp / "pack"
        pack.mkdir()
        shutil.copytree(copies / "t1", pack / "t1")
        shutil.copy(src, pack / "in.jsonl")
        shutil.copy(out, pack / "out.jsonl")
        shutil.copy(state / "t1" / "late.jsonl", pack / "late.jsonl")
        commit = subprocess.run(["git", "rev-parse", "main"], capture_output=True, text=True).stdout
        (pack / "made.json").write_text(
            json.dumps({"by": "main " + commit.strip(), "savepoint": sp.name})
        )
        with tarfile.open(dest / "savepoint.tar.gz", "w:gz") as tar:
            for p in sorted(pack.iterdir()):
                tar.add(p, arcname=p.name)


def _url(log: Path) -> str | None:
    import re

    m = re.search(r"serving on (http://[\d.]+:\d+)", log.read_text())
    return m.group(1) if m else None


if __name__ == "__main__":
    main(Path(sys.argv[1]))
