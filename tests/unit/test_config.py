"""RunConfig: the values ``weir run`` is configured with."""

from __future__ import annotations

from pathlib import Path

import pytest

from weir.base.errors import ConfigError
from weir.engine.runtime.config import RunConfig


def test_defaults_and_paths() -> None:
    cfg = RunConfig(job_file=Path("j.py"), state_dir=Path("/s"))
    assert cfg.parallelism == 1 and cfg.state_retention_ms == 3_600_000
    assert cfg.job_dir("t1") == Path("/s/t1")
    assert cfg.worker_state_path("t1", 3) == Path("/s/t1/worker-3/db")


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"parallelism": 0}, "--parallelism=0 is not valid; use 1 or more"),
        ({"state_retention_ms": -1}, "--state-retention-ms=-1 is not valid"),
        ({"flush_interval_ms": -1}, "--flush-interval-ms=-1 is not valid"),
        ({"batch_size": 0}, "--batch-size=0 is not valid; use 1 or more records"),
    ],
)
def test_bad_values_name_the_flag(kw: dict[str, int], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        RunConfig(job_file=Path("j.py"), **kw)  # type: ignore[arg-type]
