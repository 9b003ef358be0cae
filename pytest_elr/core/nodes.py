"""Node ids and directed links: the coordinates every fault is written in."""

from __future__ import annotations

from typing import Literal, Union

CONTROLLER = "controller"
Node = Union[int, str]  # noqa: UP007 -- a runtime alias; a broker id, CONTROLLER, or one controller
Link = tuple[Node, Node]  # (source, destination): the direction requests travel

#: the word for the controller leading the quorum, found when the step runs
ACTIVE = "active"

#: the key of a symbolic broker target: ``{leader_of: N}``, the broker leading partition N when
#: the step runs (docs/language.md, "The leader of a partition as a target")
LEADER_OF = "leader_of"
#: a broker as an action names it: its id, or a symbolic target (``leader_of(2)``)
BrokerRef = Union[int, str]  # noqa: UP007 -- a runtime alias, as Node


def leader_of(partition: int) -> str:
    """The broker leading ``partition`` when the step runs, as an action's broker or a link end:
    ``leader_of:<N>``. YAML writes it ``{leader_of: N}``; the executor resolves it (``Executor``)."""
    return f"{LEADER_OF}:{partition}"


def partition_led(node: object) -> int | None:
    """The partition whose leader ``node`` names (``leader_of(N)``); None: not a symbolic target."""
    if not isinstance(node, str) or not node.startswith(LEADER_OF + ":"):
        return None
    return int(node[len(LEADER_OF) + 1:])


def one_controller(target: int | str) -> str:
    """One controller of the quorum as a link end: ``controller:<n>`` (0 .. controllers - 1), or
    ``controller:active``, the one leading the quorum when the step runs (``CONTROLLER`` is every
    controller at once). YAML writes it ``{controller: n}`` / ``{controller: active}``."""
    return f"{CONTROLLER}:{target}"


def controller_of(node: Node) -> int | str | None:
    """The controller ``node`` names as one link end (a number, or ``active``); None: not one controller."""
    if not isinstance(node, str) or not node.startswith(CONTROLLER + ":"):
        return None
    target = node[len(CONTROLLER) + 1:]
    return int(target) if target.isdigit() else target


def is_controller(node: Node) -> bool:
    """``node`` is ``CONTROLLER`` or one controller."""
    return node == CONTROLLER or controller_of(node) is not None

IsolationScope = Literal["all", "brokers", "controller"]
ISOLATION_SCOPES: tuple[IsolationScope, ...] = ("all", "brokers", "controller")


def isolation_links(broker: int, scope: IsolationScope, brokers: tuple[int, ...]) -> tuple[Link, ...]:
    """Both directions of every link between ``broker`` and the peers named by ``scope``."""
    peers: list[Node] = []
    if scope in ("all", "brokers"):
        peers += [b for b in brokers if b != broker]
    if scope in ("all", "controller"):
        peers.append(CONTROLLER)
    links: list[Link] = []
    for peer in peers:
        links += [(broker, peer), (peer, broker)]
    return tuple(links)
