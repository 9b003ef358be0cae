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


def test_an_action_defined_anywhere_is_a_key_of_the_language() -> None:
    """The loader reads the registry when it reads a file: an action class defined after import
    (by a plugin, or a test) is a YAML key at once (a snapshot taken at import once missed it)."""
    import yaml

    from pytest_elr.core.reader import Reader
    from pytest_elr.scenario.loader import parse_scenario

    @dataclass(frozen=True)
    class Note(Action):
        text: str
        kind: ClassVar[str] = "note_to_self"

        @classmethod
        def parse(cls, form: str, arg: yaml.Node, r: Reader, what: str) -> list[Action]:
            return [cls(text=r.name(arg, what))]

    try:
        scenario = parse_scenario("cluster: {brokers: 1}\ntopic: {replicas: [0], min_insync_replicas: 1}\n"
                                  "steps: [{at: T0, do: [{note_to_self: hello}]}]\n")
        assert scenario.steps[0].actions == (Note(text="hello"),)
    finally:
        del ACTIONS["note_to_self"], FORMS["note_to_self"]
