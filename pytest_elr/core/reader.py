"""Reading composed YAML nodes by hand, so every value keeps its line for error messages.

The loader composes a file into nodes (no object construction, so no code runs) and hands
them to a :class:`Reader`; every action parses its own arguments with the same reader, so a
new action gets file:line errors for free.
"""

from __future__ import annotations

import difflib
import math
import re
from typing import NoReturn

import yaml

from pytest_elr.core.errors import ScenarioError
from pytest_elr.core.limits import MAX_NAME_CHARS, MAX_TEXT_CHARS, MAX_VALUES
from pytest_elr.core.nodes import ACTIVE, CONTROLLER, LEADER_OF, BrokerRef, Node, leader_of, one_controller

_TAG = "tag:yaml.org,2002:"
_PLAIN_TAGS = frozenset(f"{_TAG}{t}" for t in ("str", "int", "float", "bool", "null", "map", "seq"))
# Plain decimal only: YAML 1.1 also reads 010 (octal), 0b1, 1_000 and 1:30 (base 60) as integers.
_INTEGER = re.compile(r"^[-+]?(0|[1-9][0-9]*)$")
_NUMBER = re.compile(r"^[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?$")
_DURATION = re.compile(r"^\s*(\d{1,9}(?:\.\d{1,9})?)\s*(ms|s|m)?\s*$")
# C0 and C1 control characters (terminal escapes among them); text may keep newlines and tabs.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_NULLS = ("~", "null", "Null", "NULL", "")


def did_you_mean(word: str, choices: tuple[str, ...] | list[str]) -> str:
    """`` (did you mean 'x'?)`` for a near miss, else nothing."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class Reader:
    """Walks composed YAML nodes, counting them and raising ScenarioError with lines.

    ``brokers`` are the cluster's broker ids once the cluster is read: ids are checked against
    them; ``partitions`` the topic's partitions once the topic is read (``{leader_of: N}`` is
    checked against them; None: not known here, the executor checks it when the step runs).
    """

    def __init__(self, path: str, brokers: tuple[int, ...] = (), partitions: int | None = None) -> None:
        self.path = path
        self.brokers = brokers
        self.partitions = partitions
        self.visited = 0

    def fail(self, node: yaml.Node | None, message: str) -> NoReturn:
        line = node.start_mark.line + 1 if node is not None else None
        raise ScenarioError(message, self.path, line)

    def _count(self, node: yaml.Node) -> None:
        self.visited += 1
        if self.visited > MAX_VALUES:
            self.fail(node, f"document too large: more than {MAX_VALUES} values (alias bomb?)")
        if node.tag not in _PLAIN_TAGS:
            if isinstance(node, yaml.ScalarNode) and not _explicit_tag(node):
                kind = node.tag.removeprefix(_TAG)
                self.fail(node, f"{node.value!r} reads as a YAML {kind}; quote it (\"{node.value}\") "
                                "if you mean text")
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
                self.fail(key_node, f"{what}: unknown key {key!r}{did_you_mean(key, allowed)}; "
                                    f"expected one of {', '.join(allowed)}")
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
        text = str(node.value)
        if len(text) > MAX_TEXT_CHARS:
            self.fail(node, f"{what}: longer than {MAX_TEXT_CHARS} characters")
        if _CONTROL.search(text):
            self.fail(node, f"{what}: control characters are not allowed, got {text!r}")
        return text

    def integer(self, node: yaml.Node, what: str, minimum: int | None = None,
                maximum: int | None = None) -> int:
        text = self.scalar(node, what)
        if node.tag != f"{_TAG}int" or not _INTEGER.match(text):
            self.fail(node, f"{what}: expected a whole number, got {_shown(node)}")
        value = int(text)
        low = minimum if minimum is not None else "any"
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            bound = f">= {minimum}" if maximum is None else f"from {low} to {maximum}"
            self.fail(node, f"{what}: expected a number {bound}, got {value}")
        return value

    def number(self, node: yaml.Node, what: str, minimum: float, maximum: float) -> float:
        """A decimal number (whole or not) in [minimum, maximum]; never NaN or infinite."""
        text = self.scalar(node, what)
        if node.tag not in (f"{_TAG}int", f"{_TAG}float") or not _NUMBER.match(text):
            self.fail(node, f"{what}: expected a number, got {_shown(node)}")
        value = float(text)
        if not math.isfinite(value) or not minimum <= value <= maximum:
            self.fail(node, f"{what}: expected a number from {minimum:g} to {maximum:g}, got {text}")
        return value

    def string(self, node: yaml.Node, what: str, choices: tuple[str, ...] | None = None) -> str:
        text = self.scalar(node, what)
        if choices is not None and text not in choices:
            self.fail(node, f"{what}: expected one of {', '.join(choices)}, got {text!r}"
                            f"{did_you_mean(text, choices)}")
        return text

    def name(self, node: yaml.Node, what: str) -> str:
        """A short one-line name (a scenario's, a step's label)."""
        text = self.scalar(node, what).strip()
        if node.tag == f"{_TAG}null" or not text:
            self.fail(node, f"{what}: expected a name, got nothing")
        if "\n" in text or "\t" in text:
            self.fail(node, f"{what}: expected one line, got {text!r}")
        if len(text) > MAX_NAME_CHARS:
            self.fail(node, f"{what}: longer than {MAX_NAME_CHARS} characters")
        return text

    def boolean(self, node: yaml.Node, what: str) -> bool:
        text = self.scalar(node, what)
        if node.tag != "tag:yaml.org,2002:bool":
            self.fail(node, f"{what}: expected true or false, got {text!r}")
        return text.lower() in ("true", "yes", "on")

    def duration(self, node: yaml.Node, what: str, maximum: float) -> float:
        """A positive duration (``30s``, ``500ms``, ``2m``; a bare number is seconds) up to ``maximum``."""
        text = self.scalar(node, what)
        match = _DURATION.match(text)
        if not match:
            self.fail(node, f"{what}: expected a duration such as 30s, 500ms or 2m, got {text!r}")
        value, unit = float(match.group(1)), match.group(2) or "s"
        seconds = value * {"ms": 0.001, "s": 1.0, "m": 60.0}[unit]
        if not 0 < seconds <= maximum:
            self.fail(node, f"{what}: expected more than 0 and at most {maximum:g}s, got {text!r}")
        return seconds

    # --- node ids ----------------------------------------------------------------------------

    def broker(self, node: yaml.Node, what: str) -> int:
        if isinstance(node, yaml.ScalarNode) and node.tag != f"{_TAG}int":
            self.fail(node, f"{what}: expected a broker id, got {_shown(node)}")
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

    def target(self, node: yaml.Node, what: str) -> BrokerRef:
        """A broker id, or ``{leader_of: N}``: the broker leading partition N when the step runs."""
        if isinstance(node, yaml.MappingNode):
            doc = self.mapping(node, what, (LEADER_OF,))
            if LEADER_OF not in doc:
                self.fail(node, f"{what}: expected a broker id or {{{LEADER_OF}: <partition>}}")
            return self.leader_of(doc[LEADER_OF], f"{what}.{LEADER_OF}")
        return self.broker(node, what)

    def targets(self, node: yaml.Node, what: str) -> list[BrokerRef]:
        """One target (a broker id or ``{leader_of: N}``), or a list of them."""
        if isinstance(node, yaml.SequenceNode):
            return [self.target(n, what) for n in self.sequence(node, what)]
        return [self.target(node, what)]

    def leader_of(self, node: yaml.Node, what: str) -> str:
        """``N`` of ``{leader_of: N}``: a partition of the topic."""
        return leader_of(self.partition(node, what))

    def partition(self, node: yaml.Node, what: str) -> int:
        """A partition of the topic (``{leader_of: N}``, an action's ``partition: N``)."""
        if not (isinstance(node, yaml.ScalarNode) and node.tag == f"{_TAG}int"):
            self.fail(node, f"{what}: expected a partition number, got {_shown(node)}")
        partition = self.integer(node, what, minimum=0)
        n = self.partitions
        if n is not None and partition >= n:
            self.fail(node, f"{what}: no partition {partition}: the topic has {n} partition{'s' if n > 1 else ''} "
                            f"(0..{n - 1}; topic: {{partitions: {partition + 1}}} for more)")
        return partition

    def node(self, node: yaml.Node, what: str) -> Node:
        """A broker id, ``controller`` (every controller), ``{controller: n|active}`` (one; its
        number is checked against the cluster with the action, ``Action.refused_by``), or
        ``{leader_of: N}`` (the broker leading partition N when the step runs)."""
        if isinstance(node, yaml.MappingNode):
            doc = self.mapping(node, what, (CONTROLLER, LEADER_OF))
            if LEADER_OF in doc and len(doc) == 1:
                return self.leader_of(doc[LEADER_OF], f"{what}.{LEADER_OF}")
            if CONTROLLER not in doc or len(doc) > 1:
                self.fail(node, f"{what}: expected {{controller: <number or {ACTIVE}>}} or "
                                f"{{{LEADER_OF}: <partition>}}")
            target = doc[CONTROLLER]
            if isinstance(target, yaml.ScalarNode) and target.value == ACTIVE:
                return one_controller(ACTIVE)
            if not (isinstance(target, yaml.ScalarNode) and target.tag == f"{_TAG}int"):
                self.fail(target, f"{what}.controller: expected a controller number or {ACTIVE}, got {_shown(target)}")
            return one_controller(self.integer(target, f"{what}.controller", minimum=0))
        if self.scalar(node, what) == CONTROLLER:
            return CONTROLLER
        return self.broker(node, what)

    def nodes(self, node: yaml.Node, what: str) -> list[Node]:
        if isinstance(node, yaml.SequenceNode):
            return [self.node(n, what) for n in self.sequence(node, what)]
        return [self.node(node, what)]


def _explicit_tag(node: yaml.ScalarNode) -> bool:
    """Whether the file itself wrote a tag (``!!python/...``), not YAML's reading of plain text."""
    buffer, index = node.start_mark.buffer, node.start_mark.index
    return bool(buffer) and index < len(buffer) and buffer[index] == "!"


def _shown(node: yaml.Node) -> str:
    """A value as the user wrote it, saying so when quotes made a number into text."""
    if isinstance(node, yaml.ScalarNode) and node.style in ("'", '"'):
        return f"the text {node.value!r} (quoted: write it without quotes)"
    if isinstance(node, yaml.ScalarNode) and node.value in _NULLS:
        return "nothing"
    return kind_of(node) if not isinstance(node, yaml.ScalarNode) else repr(node.value)


def kind_of(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return f"{node.value!r}"
