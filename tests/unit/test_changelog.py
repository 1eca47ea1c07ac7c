"""CHANGELOG.md keeps Keep a Changelog's form, and its newest release is the package's version."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RELEASE = re.compile(r"## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})")
SECTIONS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def _headings() -> list[str]:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.startswith("#")]


def test_the_newest_release_is_the_packages_version() -> None:
    releases = [m.group(1) for h in _headings() if (m := RELEASE.fullmatch(h))]
    assert releases, "CHANGELOG.md has no release heading '## [x.y.z] - YYYY-MM-DD'"
    with open(ROOT / "pyproject.toml", "rb") as fh:
        declared = tomllib.load(fh)["project"]["version"]
    assert releases[0] == declared == version("weir-stream")


def test_the_headings_are_keep_a_changelogs() -> None:
    headings = _headings()
    assert headings[0] == "# Changelog"
    for heading in headings[1:]:
        if heading.startswith("### "):
            assert heading[4:] in SECTIONS, f"{heading!r}: not a Keep a Changelog section"
        else:
            assert heading == "## [Unreleased]" or RELEASE.fullmatch(heading), heading
    dates = [m.group(2) for h in headings if (m := RELEASE.fullmatch(h))]
    assert dates == sorted(dates, reverse=True), "releases go newest first"
