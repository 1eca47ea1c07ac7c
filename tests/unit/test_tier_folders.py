"""Which folders a tier's run collects (``tests/support/tiers.py``): a run of one tier skips the
folders that hold none of its tests, and never skips one that may, whatever the expression."""

from __future__ import annotations

import doctest

import pytest

from tests.support import tiers
from tests.support.tiers import folder_tiers, selects_none_of, tier_of

FOLDERS = ("unit", "property", "contract", "security", "integration", "docs", "cluster", "soak")


@pytest.mark.parametrize(
    ("markexpr", "skipped"),
    [
        ("fast", {"integration", "docs", "cluster", "soak"}),
        ("integration", {"unit", "property", "contract", "soak"}),
        ("cluster or soak", {"unit", "property", "contract"}),
        ("soak", {"unit", "property", "contract", "security", "integration", "docs", "cluster"}),
        ("not fast", {"unit", "property", "contract"}),
        ("", set()),  # no -m: everything
        ("integration and kafka", set()),  # another marker: any folder may hold one
        ("slow", set()),
    ],
)
def test_a_tiers_run_skips_only_folders_without_its_tests(markexpr: str, skipped: set[str]) -> None:
    assert {f for f in FOLDERS if selects_none_of(markexpr, f)} == skipped


def test_folder_tiers_hold_every_tier_tier_of_gives() -> None:
    """Whatever fixtures a test uses, its tier is one its folder's ``folder_tiers`` names (a
    fast folder's test with a process fixture is refused by ``misplaced``, not moved)."""
    fixture_sets = [(), ("tmp_path",), ("weir_server",), ("spark_cluster",), ("s3", "run_weir")]
    for folder in FOLDERS:
        for fixtures in fixture_sets:
            tier = tier_of(folder, fixtures)
            if folder in tiers.FAST_FOLDERS and set(fixtures) & tiers.PROCESS_FIXTURES:
                continue
            assert tier in folder_tiers(folder), (folder, fixtures, tier)


def test_the_tier_modules_examples_run() -> None:
    failed, tried = doctest.testmod(tiers)
    assert tried >= 2 and failed == 0
