"""Modules planted beside a job file by another local account never run as weir's user.

The audit's attack: a shared jobs folder any account can write; the attacker (``nobody``) drops
``sqlglot.py`` there, and the owner's ``weir explain ads.sql``, run just to look at the file,
imported it (the job's directory went first on ``sys.path``). Now a job file in a directory
others can write (or owned by another user) is refused, as ssh refuses such a key file; in a
sticky shared directory (``/tmp``'s mode) the job runs with a WARNING, and weir's dependencies
still come from site-packages, also under ``python -m weir`` run from that directory.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.security.conftest import Stranger
from tests.support import WEIR
from tests.support.servers import weir_env

SQL_JOB = """CREATE TABLE events (
  id STRING, event STRING, ts BIGINT, `value` DOUBLE,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH ('connector' = 'url', 'url' = 'generator://ads?rate=10');
CREATE VIEW clicks AS SELECT id, window_start, window_end, COUNT(*) AS n
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY id, window_start, window_end;
"""
# what the attacker plants: on import it leaves a file behind (as whoever imported it)
PLANT = "import os\nopen(os.path.join(os.path.dirname(__file__), 'PWNED-' + __name__), 'w')\n"
PLANTED = ("sqlglot", "uvicorn", "fastapi", "msgpack", "orjson")


def _plant(stranger: Stranger, directory: Path) -> None:
    code = (
        "import pathlib\n"
        f"for name in {PLANTED!r}:\n"
        f"    pathlib.Path({str(directory)!r}, name + '.py').write_text({PLANT!r})\n"
    )
    done = stranger.run(code)
    assert done.returncode == 0, f"the stranger could not write the shared folder: {done.stderr}"


def _pwned(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("PWNED-*"))


def _weir(args: list[str], cwd: Path, argv0: list[str] = WEIR) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*argv0, *args], cwd=cwd, env=weir_env(None), capture_output=True, text=True, timeout=60
    )


def test_a_job_in_a_folder_others_can_write_is_refused_and_nothing_planted_runs(
    public_dir: Path, stranger: Stranger
) -> None:
    shared = public_dir / "jobs"
    shared.mkdir()
    shared.chmod(0o777)  # a shared jobs folder
    (shared / "ads.sql").write_text(SQL_JOB)
    _plant(stranger, shared)
    done = _weir(["explain", str(shared / "ads.sql")], cwd=public_dir)
    assert _pwned(shared) == [], done.stderr
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"the directory {shared} is writable by every user (mode 0777)" in done.stderr
    assert f"chmod o-w {shared}" in done.stderr


def test_a_job_file_others_can_write_or_own_is_refused(
    public_dir: Path, stranger: Stranger
) -> None:
    job = public_dir / "ads.sql"
    job.write_text(SQL_JOB)
    job.chmod(0o666)
    done = _weir(["explain", str(job)], cwd=public_dir)
    assert done.returncode == 2 and f"the file {job} is writable by every user" in done.stderr
    if stranger.other_uid:  # a job file the stranger wrote, in a folder of its own
        theirs = public_dir / "theirs"
        theirs.mkdir()
        theirs.chmod(0o777)
        made = stranger.run(
            f"import pathlib, os; d = pathlib.Path({str(theirs)!r}, 'own'); d.mkdir(); "
            f"(d / 'ads.sql').write_text({SQL_JOB!r})"
        )
        assert made.returncode == 0, made.stderr
        done = _weir(["explain", str(theirs / "own" / "ads.sql")], cwd=public_dir)
        assert done.returncode == 2, done.stdout
        assert "belongs to user nobody (uid 65534), not to you or root" in done.stderr


def test_in_a_sticky_shared_folder_weirs_imports_stay_its_own(
    public_dir: Path, stranger: Stranger
) -> None:
    """``/tmp``-like: others may add files but not replace ours. The job runs (with a
    WARNING), and neither the job's directory nor the working directory of ``python -m weir``
    lets a planted module stand in for a dependency."""
    shared = public_dir / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    job = shared / "ads.sql"
    job.write_text(SQL_JOB)
    _plant(stranger, shared)
    done = _weir(["explain", str(job)], cwd=shared)
    assert _pwned(shared) == [], done.stderr
    assert done.returncode == 0, done.stderr
    assert "clicks" in done.stdout
    assert "writable by every user (sticky)" in done.stderr
    # `python -m` itself puts the working directory first while it imports the weir package
    # (Python's rule: the docs say to use `weir` or `python -P -m weir` there); what weir
    # imports after that, sqlglot, uvicorn and fastapi among them, still comes from
    # site-packages
    for name in ("msgpack", "orjson"):
        (shared / f"{name}.py").unlink()
    done = _weir(["explain", str(job)], cwd=shared, argv0=[sys.executable, "-m", "weir"])
    assert _pwned(shared) == [], done.stderr
    assert done.returncode == 0 and "clicks" in done.stdout, done.stderr
