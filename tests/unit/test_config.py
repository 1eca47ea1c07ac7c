"""RunConfig: the settings a run of a job is configured with, each declared once
(``runtime.settings``), apart from the facts the run decides itself (``RunFacts``)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from weir.base.errors import ConfigError
from weir.base.settings import render
from weir.engine.runtime.config import RunConfig, RunFacts
from weir.engine.runtime.settings import BY_NAME, RUN_SETTINGS


def test_defaults_and_paths() -> None:
    cfg = RunConfig(job_file=Path("j.py"), state_dir=Path("/s"))
    assert cfg.parallelism == 1 and cfg.state_retention_ms == 3_600_000
    assert cfg.job_dir("t1") == Path("/s/t1")
    assert cfg.worker_state_path("t1", 3) == Path("/s/t1/worker-3/db")


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"parallelism": 0}, "`parallelism`=0 is too small; use 1 or more"),
        ({"state_retention_ms": -1}, "`state_retention_ms`=-1 is too small; use 0 or more"),
        ({"flush_interval_ms": -1}, "`flush_interval_ms`=-1 is too small"),
        ({"batch_size": 0}, "`batch_size`=0 is too small; use 1 or more"),
        ({"exchange_transport": "udp"}, "`exchange_transport`='udp' is not a choice; use one of"),
        ({"log_level": "LOUD"}, "`log_level`='LOUD' is not a choice"),
        ({"exit_at_end": "yes"}, "`exit_at_end`='yes' is not on or off"),
    ],
)
def test_bad_values_name_the_setting(kw: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        RunConfig(job_file=Path("j.py"), **kw)  # type: ignore[arg-type]
    # the command line shows the setting as its flag
    flags = {s.name: s.flag for s in RUN_SETTINGS}
    assert render(str(info.value), flags).startswith(BY_NAME[next(iter(kw))].flag + "=")


def test_every_user_setting_is_declared_once_with_the_fields_default() -> None:
    declared = [s.name for s in RUN_SETTINGS]
    assert len(declared) == len(set(declared))
    user = {f.name: f for f in fields(RunConfig) if f.name != "job_file"}
    assert set(user) == set(declared)
    cfg = RunConfig(job_file="j.py")
    for name in declared:
        default = BY_NAME[name].default
        value = getattr(cfg, name)
        assert value == (Path(default) if isinstance(value, Path) else default), name


def test_run_facts_are_not_settings() -> None:
    facts = {f.name for f in fields(RunFacts)}
    assert facts == {"run_id", "restore_from", "worker_host", "serve_state", "status_interval_ms"}
    assert not facts & set(BY_NAME) and not facts & {f.name for f in fields(RunConfig)}
