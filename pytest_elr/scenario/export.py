"""Write actions back out as a scenario file (used for shrunk counterexamples)."""

from __future__ import annotations

import yaml

from pytest_elr.actions import Action
from pytest_elr.core.specs import ClusterSpec, TopicSpec


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
        steps.append({"at": f"S{i}", "do": action.to_yaml(cluster.brokers)})
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
