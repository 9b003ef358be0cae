"""Fixtures for the lazyfs tests: a real FUSE mount of the layer per test."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator

import pytest


def _fuse_missing() -> str | None:
    try:
        import pyfuse3  # noqa: F401
        import trio  # noqa: F401
    except ImportError as e:
        return f"pyfuse3/trio not installed: {e}"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "/dev/fuse not usable"
    if shutil.which("fusermount3") is None:
        return "fusermount3 not installed (apt-get install fuse3)"
    return None


@pytest.fixture(scope="session")
def needs_fuse() -> None:
    """Fail (never skip) where no FUSE filesystem can be mounted: ./elr test installs what it needs."""
    reason = _fuse_missing()
    if reason is not None:
        pytest.fail(f"cannot mount the FUSE layer: {reason}")


@pytest.fixture
def lazyfs(tmp_path, needs_fuse) -> Iterator:
    from pytest_elr.lazyfs.harness import mounted

    with mounted(str(tmp_path / "backing"), str(tmp_path / "mnt")) as fs:
        yield fs


@pytest.fixture(params=["power_off", "kill"])
def power_cut(request) -> Callable:
    """Both ways to cut power: drop in place, or SIGKILL the layer and remount."""

    def cut(fs) -> None:
        if request.param == "power_off":
            fs.power_off()
        else:
            fs.kill()
            fs.start()

    return cut
