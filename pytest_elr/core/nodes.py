"""Node ids and directed links: the coordinates every fault is written in."""

from __future__ import annotations

from typing import Literal, Union

CONTROLLER = "controller"
Node = Union[int, str]  # noqa: UP007 -- a runtime alias; a broker id, or CONTROLLER
Link = tuple[Node, Node]  # (source, destination): the direction requests travel

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
