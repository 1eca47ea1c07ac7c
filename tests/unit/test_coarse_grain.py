"""Which generations are written in coarse cells (``cellcodec.write_coarse``, decision 0021):
those with fewer than ``COARSE_ROWS`` rows a bucket of the key groups they touch."""

from __future__ import annotations

import numpy as np

from weir.state import cellcodec


def _groups(rows: int, key_groups: int) -> np.ndarray:
    return (np.arange(rows) % key_groups).astype(np.uint16)


def test_a_sparse_window_is_coarse_and_a_dense_one_fine() -> None:
    per_group = cellcodec.COARSE_ROWS * cellcodec.BUCKETS  # rows a key group holds at the line
    # the peer workload at a million ids: ~86k keys a window over 128 key groups
    assert cellcodec.write_coarse(86_000, _groups(86_000, 128))
    assert not cellcodec.write_coarse(128 * per_group, _groups(128 * per_group, 128))
    assert cellcodec.write_coarse(128 * per_group - 1, _groups(128 * per_group - 1, 128))
    # few key groups touched (a worker of many, or few keys): judged by those it touches
    assert not cellcodec.write_coarse(2 * per_group, _groups(2 * per_group, 2))
    assert cellcodec.write_coarse(10, _groups(10, 10))
    assert not cellcodec.write_coarse(0, _groups(0, 1))
