"""Every backend handles every action of the language (one dispatch table each)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

from pytest_elr.actions import ACTIONS, FORMS, Action, unhandled
from pytest_elr.backends import available_backends, load_backend


@pytest.mark.parametrize("name", sorted(available_backends()))
def test_backend_handles_every_action(name: str) -> None:
    backend = load_backend(name)
    assert unhandled(backend.handled_actions()) == [], f"the {name} backend misses these actions"


def test_an_action_no_backend_handles_is_noticed() -> None:
    """The check above can fail: a new action without handlers is listed for every backend."""

    @dataclass(frozen=True)
    class Unheard(Action):
        kind: ClassVar[str] = "unheard_of"

    try:
        for name in available_backends():
            assert unhandled(load_backend(name).handled_actions()) == ["unheard_of"]
    finally:
        del ACTIONS["unheard_of"], FORMS["unheard_of"]
