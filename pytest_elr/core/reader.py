"""Reading composed YAML nodes by hand, so every value keeps its line for error messages.

The loader composes a file into nodes (no object construction, so no code runs) and hands
them to a :class:`Reader`; every action parses its own arguments with the same reader, so a
new action gets file:line errors for free.
"""

from __future__ import annotations

import re
from typing import NoReturn

import yaml

from pytest_elr.core.errors import ScenarioError
from pytest_elr.core.nodes import CONTROLLER, Node

MAX_NODES = 20_000  # a scenario is small; more means alias expansion (a "YAML bomb")
_PLAIN_TAGS = frozenset(
    f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "map", "seq")
)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m)?\s*$")


class Reader:
    """Walks composed YAML nodes, counting them and raising ScenarioError with lines.

    ``brokers`` are the cluster's broker ids once the cluster is read: ids are checked against
    them.
    """

    def __init__(self, path: str, brokers: tuple[int, ...] = ()) -> None:
        self.path = path
        self.brokers = brokers
        self.visited = 0

    def fail(self, node: yaml.Node | None, message: str) -> NoReturn:
        line = node.start_mark.line + 1 if node is not None else None
        raise ScenarioError(message, self.path, line)

    def _count(self, node: yaml.Node) -> None:
        self.visited += 1
        if self.visited > MAX_NODES:
            self.fail(node, f"document too large: more than {MAX_NODES} values (alias bomb?)")
        if node.tag not in _PLAIN_TAGS:
            self.fail(node, f"tag {node.tag} is not allowed: scenarios are plain data")

    def mapping(self, node: yaml.Node, what: str, allowed: tuple[str, ...]) -> dict[str, yaml.Node]:
        self._count(node)
        if not isinstance(node, yaml.MappingNode):
            self.fail(node, f"{what}: expected a mapping with keys {', '.join(allowed)}, got {kind_of(node)}")
        out: dict[str, yaml.Node] = {}
        for key_node, value in node.value:
            self._count(key_node)
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if not isinstance(key, str):
                self.fail(key_node, f"{what}: keys must be plain names")
            if key in out:
                self.fail(key_node, f"{what}: duplicate key {key!r}")
            if key not in allowed:
                self.fail(key_node, f"{what}: unknown key {key!r}; expected one of {', '.join(allowed)}")
            out[key] = value
        return out

    def sequence(self, node: yaml.Node, what: str) -> list[yaml.Node]:
        self._count(node)
        if not isinstance(node, yaml.SequenceNode):
            self.fail(node, f"{what}: expected a list, got {kind_of(node)}")
        for item in node.value:
            self._count(item)
        return list(node.value)

    def scalar(self, node: yaml.Node, what: str) -> str:
        self._count(node)
        if not isinstance(node, yaml.ScalarNode):
            self.fail(node, f"{what}: expected a single value, got {kind_of(node)}")
        return str(node.value)

    def integer(self, node: yaml.Node, what: str, minimum: int | None = None) -> int:
        text = self.scalar(node, what)
        if node.tag != "tag:yaml.org,2002:int":
            self.fail(node, f"{what}: expected a whole number, got {text!r}")
        value = int(text, 0)
        if minimum is not None and value < minimum:
            self.fail(node, f"{what}: expected a number >= {minimum}, got {value}")
        return value

    def string(self, node: yaml.Node, what: str, choices: tuple[str, ...] | None = None) -> str:
        text = self.scalar(node, what)
        if choices is not None and text not in choices:
            self.fail(node, f"{what}: expected one of {', '.join(choices)}, got {text!r}")
        return text

    def boolean(self, node: yaml.Node, what: str) -> bool:
        text = self.scalar(node, what)
        if node.tag != "tag:yaml.org,2002:bool":
            self.fail(node, f"{what}: expected true or false, got {text!r}")
        return text.lower() in ("true", "yes", "on")

    def duration(self, node: yaml.Node, what: str) -> float:
        text = self.scalar(node, what)
        match = _DURATION.match(text)
        if not match:
            self.fail(node, f"{what}: expected a duration such as 30s, 500ms or 2m, got {text!r}")
        value, unit = float(match.group(1)), match.group(2) or "s"
        return value * {"ms": 0.001, "s": 1.0, "m": 60.0}[unit]

    # --- node ids ----------------------------------------------------------------------------

    def broker(self, node: yaml.Node, what: str) -> int:
        broker = self.integer(node, what)
        if broker not in self.brokers:
            known = ", ".join(map(str, self.brokers))
            self.fail(node, f"{what}: unknown broker id {broker}; the cluster has brokers {known}")
        return broker

    def brokers_list(self, node: yaml.Node, what: str) -> list[int]:
        """One broker id, or a list of them."""
        if isinstance(node, yaml.ScalarNode):
            return [self.broker(node, what)]
        return [self.broker(n, what) for n in self.sequence(node, what)]

    def node(self, node: yaml.Node, what: str) -> Node:
        """A broker id or ``controller``."""
        if self.scalar(node, what) == CONTROLLER:
            return CONTROLLER
        return self.broker(node, what)

    def nodes(self, node: yaml.Node, what: str) -> list[Node]:
        if isinstance(node, yaml.SequenceNode):
            return [self.node(n, what) for n in self.sequence(node, what)]
        return [self.node(node, what)]


def kind_of(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return f"{node.value!r}"
