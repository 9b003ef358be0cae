"""Write actions back out as a scenario file (used for shrunk counterexamples)."""

from __future__ import annotations

from typing import Any

import yaml

from pytest_elr.actions import Action
from pytest_elr.core.observation import Observation
from pytest_elr.core.specs import ClusterSpec, TopicSpec


def expectation_of(obs: Observation) -> dict[str, Any]:
    """A step's ``expect`` for the state ``obs`` (leader ``none`` when leaderless)."""
    return {"leader": "none" if obs.leader is None else obs.leader, "isr": list(obs.isr), "elr": list(obs.elr),
            "last_known_elr": list(obs.last_known_elr), "fenced": list(obs.fenced)}


def scenario_yaml(
    name: str,
    description: str,
    cluster: ClusterSpec,
    topic: TopicSpec,
    actions: list[Action],
    verdict_by_profile: dict[str, str],
    expectations: list[dict[str, Any]] | None = None,
    profiles: list[str] | None = None,
) -> str:
    """One step per action; ``expectations``: what each step expects (e.g. the model's state after
    it, from :func:`model_expectations`)."""
    # as many log dirs as the cluster has, or as an action needs (a move between them)
    log_dirs = max([cluster.log_dirs, *(a.log_dirs_needed for a in actions)])
    steps = []
    for i, action in enumerate(actions, 1):
        step: dict[str, Any] = {"at": f"S{i}", "do": action.to_yaml(cluster.brokers)}
        if expectations is not None and expectations[i - 1]:
            step["expect"] = expectations[i - 1]
        steps.append(step)
    doc = {
        "name": name,
        "description": description,
        **({"profiles": profiles} if profiles else {}),
        "cluster": {"brokers": list(cluster.brokers), "controllers": cluster.controllers,
                    **({"log_dirs": log_dirs} if log_dirs > 1 else {})},
        "topic": {"name": topic.name, "replicas": list(topic.replicas),
                  "min_insync_replicas": topic.min_insync_replicas},
        "steps": steps,
        "verdict": {"acked_loss": "none",
                    "by_profile": {p: {"acked_loss": v} for p, v in verdict_by_profile.items()}},
    }
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=100)
