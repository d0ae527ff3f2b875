"""empirical.common.files: complete-or-untouched writes with ordinary file permissions."""
import os
import stat

import numpy as np
import pytest

from empirical.common.files import atomic_path, atomic_write_text


def test_replaces_target_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "sub" / "a.txt"
    atomic_write_text(target, "one")
    atomic_write_text(target, "two")
    assert target.read_text() == "two"
    assert sorted(p.name for p in target.parent.iterdir()) == ["a.txt"]


def test_failure_keeps_the_old_file(tmp_path):
    target = tmp_path / "a.npy"
    np.save(target, np.arange(3))
    with pytest.raises(RuntimeError):
        with atomic_path(target, suffix=".npy") as tmp:
            np.save(tmp, np.zeros(5))
            raise RuntimeError("interrupted")
    np.testing.assert_array_equal(np.load(target), np.arange(3))
    assert [p.name for p in tmp_path.iterdir()] == ["a.npy"]


def test_permissions_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        target = atomic_write_text(tmp_path / "t.csv", "x")
    finally:
        os.umask(old)
    if os.name == "posix":
        assert stat.S_IMODE(target.stat().st_mode) == 0o644  # not mkstemp's private 0o600
