"""Backends: where a scenario runs. Found through the ``pytest_elr.backends`` entry points."""

from __future__ import annotations

from importlib.metadata import entry_points

from pytest_elr.backends.base import Backend
from pytest_elr.core.errors import BackendError


def available_backends() -> dict[str, str]:
    """Backend name -> "module:Class", built-ins first, then installed plugins."""
    found = {
        "model": "pytest_elr.backends.model:ModelBackend",
        "kafka": "pytest_elr.backends.kafka:KafkaBackend",
    }
    for ep in entry_points(group="pytest_elr.backends"):
        found.setdefault(ep.name, ep.value)
    return found


def load_backend(name: str) -> type[Backend]:
    known = available_backends()
    if name not in known:
        raise BackendError(f"unknown backend {name!r}; available: {', '.join(sorted(known))}")
    module_name, _, attr = known[name].partition(":")
    module = __import__(module_name, fromlist=[attr])
    return getattr(module, attr)


__all__ = ["Backend", "BackendError", "available_backends", "load_backend"]
