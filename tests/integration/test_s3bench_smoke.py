"""The S3 benchmark's storage sections at a small scale against the real SeaweedFS server, so
that ``make bench-s3`` keeps working: the second checkpoint uploads only the SST file of the
updated keys, and a restore from S3 and from a directory both hold every key."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import s3_bench


@pytest.fixture(scope="module")
def sections(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    workdir = tmp_path_factory.mktemp("s3bench")
    with s3_bench.s3_server(workdir) as server:
        return s3_bench.state_sections(workdir, server, keys=20_000, updates=2, rounds=2)


def test_second_checkpoint_uploads_only_the_updated_keys(sections: dict[str, Any]) -> None:
    inc = sections["incremental"]
    rows = inc["checkpoints"]
    assert [r["id"] for r in rows] == [1, 2, 3]
    assert rows[0]["uploaded_bytes"] == rows[0]["size"] > 0
    for row in rows[1:]:
        assert len(row["new_sst_files"]) == 1, row
        assert row["dropped_sst_files"] == []
        assert 0 < row["uploaded_bytes"] < rows[0]["uploaded_bytes"] * 0.1
    assert inc["second_over_first"] == round(
        rows[1]["uploaded_bytes"] / inc["first_uploaded_bytes"], 4
    )


def test_restore_from_s3_and_from_a_directory(sections: dict[str, Any]) -> None:
    restore = sections["restore"]
    assert restore["keys"] == 20_000
    assert len(restore["s3_s"]) == len(restore["local_s"]) == 2
    assert all(s > 0 for s in restore["s3_s"] + restore["local_s"])
    assert restore["checkpoint_bytes"] == sections["incremental"]["checkpoints"][-1]["size"]
