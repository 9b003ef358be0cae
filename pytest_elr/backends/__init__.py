"""Backends: where a scenario runs, found through the ``pytest_elr.backends`` entry points.

The built-in ``model`` and ``kafka`` backends are registered there by this package's own
metadata (pyproject.toml), exactly as a third-party backend registers itself.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from pytest_elr.backends.base import Backend
from pytest_elr.core.errors import BackendError
from pytest_elr.core.reader import did_you_mean

GROUP = "pytest_elr.backends"


def available_backends() -> dict[str, str]:
    """Backend name -> "module:Class", from every installed distribution."""
    return {ep.name: ep.value for ep in entry_points(group=GROUP)}


def load_backend(name: str) -> type[Backend]:
    known = available_backends()
    if name not in known:
        raise BackendError(f"unknown backend {name!r}{did_you_mean(name, sorted(known))}; "
                           f"available: {', '.join(sorted(known)) or 'none'} "
                           f"(backends register in the {GROUP!r} entry-point group)")
    return next(ep for ep in entry_points(group=GROUP) if ep.name == name).load()


__all__ = ["Backend", "BackendError", "available_backends", "load_backend"]
