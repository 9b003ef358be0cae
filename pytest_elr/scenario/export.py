"""Write actions back out as a scenario file (used for shrunk counterexamples)."""

from __future__ import annotations

from typing import Any

import yaml

from pytest_elr.actions import BROKER_ACTIONS, Action, Cut, Heal, PowerOff, Produce, SetMinIsr, Slow, Wait
from pytest_elr.core.nodes import Link, isolation_links
from pytest_elr.core.specs import ClusterSpec, TopicSpec

_SCOPES = ("all", "brokers", "controller")


def action_to_yaml(action: Action, brokers: tuple[int, ...]) -> list[dict[str, Any]]:
    if isinstance(action, Produce):
        return [{"produce": {"count": action.count, "acks": action.acks}}]
    if isinstance(action, PowerOff):
        return [{"power_off": list(action.brokers)}]
    if isinstance(action, SetMinIsr):
        return [{"set_min_isr": action.value}]
    if isinstance(action, Wait):
        return [{"wait": f"{action.seconds}s"}]
    if isinstance(action, Heal) and action.links is None:
        return [{"heal": "all"}]
    if isinstance(action, (Cut, Slow, Heal)):
        links = action.links or ()
        for b in brokers:
            for scope in _SCOPES:
                if set(links) == set(isolation_links(b, scope, brokers)):  # type: ignore[arg-type]
                    if isinstance(action, Cut):
                        return [{"isolate": {"broker": b, "from": scope}}]
                    if isinstance(action, Slow) and scope == "brokers":
                        return [{"slow": b}]
                    if isinstance(action, Heal) and scope == "all":
                        return [{"heal": b}]
        return [{action.kind: _link(link)} for link in links]
    if action.kind in BROKER_ACTIONS:
        return [{action.kind: action.broker}]  # type: ignore[attr-defined]
    raise ValueError(f"cannot write action {action!r}")


def _link(link: Link) -> dict[str, Any]:
    return {"from": link[0], "to": link[1]}


def scenario_yaml(
    name: str,
    description: str,
    cluster: ClusterSpec,
    topic: TopicSpec,
    actions: list[Action],
    verdict_by_profile: dict[str, str],
) -> str:
    steps = []
    for i, action in enumerate(actions, 1):
        steps.append({"at": f"S{i}", "do": action_to_yaml(action, cluster.brokers)})
    doc = {
        "name": name,
        "description": description,
        "cluster": {"brokers": list(cluster.brokers), "controllers": cluster.controllers},
        "topic": {"name": topic.name, "replicas": list(topic.replicas),
                  "min_insync_replicas": topic.min_insync_replicas},
        "steps": steps,
        "verdict": {"acked_loss": "none",
                    "by_profile": {p: {"acked_loss": v} for p, v in verdict_by_profile.items()}},
    }
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=100)
