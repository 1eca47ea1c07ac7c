"""``state.untrusted``: a directory others write is read without following anything they
planted: a symlink anywhere below the trusted root, a FIFO, a file whose size changed since it
was checked are refused; a regular file is copied from the descriptor that was judged."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from weir.base.errors import StateError
from weir.state import untrusted


def test_a_regular_file_is_copied_from_its_checked_descriptor(tmp_path: Path) -> None:
    d = tmp_path / "root" / "a" / "b"
    d.mkdir(parents=True)
    (d / "kg-00001.sst").write_bytes(b"x" * 3000)
    (d / "other.txt").write_bytes(b"no")
    with untrusted.open_dir(tmp_path / "root", d) as fd:
        assert untrusted.regular_files(fd, "kg-*.sst", str(d)) == [("kg-00001.sst", 3000)]
        copy = untrusted.copy_out(fd, "kg-00001.sst", str(d), 3000, tmp_path / "copy")
    assert copy.read_bytes() == b"x" * 3000
    assert copy.stat().st_mode & 0o777 == 0o600


def test_a_symlinked_directory_below_the_root_is_never_followed(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (outside / "b").mkdir(parents=True)
    root.mkdir()
    (root / "a").symlink_to(outside)  # swapped in for a directory after the check
    with pytest.raises(StateError, match="cannot be opened as a directory"):
        with untrusted.open_dir(root, root / "a" / "b"):
            pass


def test_symlinks_fifos_and_changed_sizes_are_refused(tmp_path: Path) -> None:
    (tmp_path / "secret").write_bytes(b"s")
    (tmp_path / "kg-00001.sst").symlink_to(tmp_path / "secret")
    os.mkfifo(tmp_path / "kg-00002.sst")
    (tmp_path / "kg-00003.sst").write_bytes(b"abc")
    with untrusted.open_dir(tmp_path, tmp_path) as fd:
        with pytest.raises(StateError, match="kg-00001.sst is a symbolic link"):
            untrusted.open_regular(fd, "kg-00001.sst", str(tmp_path))
        with pytest.raises(StateError, match="kg-00002.sst is not a regular file"):
            untrusted.open_regular(fd, "kg-00002.sst", str(tmp_path))  # and does not block
        with pytest.raises(StateError, match="has 3 bytes, not the 9 checked"):
            untrusted.copy_out(fd, "kg-00003.sst", str(tmp_path), 9, tmp_path / "c")
        with pytest.raises(StateError, match="symbolic link"):
            untrusted.regular_files(fd, "kg-*.sst", str(tmp_path))
