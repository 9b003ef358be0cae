"""Write actions back out as a scenario file (used for shrunk counterexamples)."""

from __future__ import annotations

from typing import Any

import yaml

from pytest_elr.actions import Action
from pytest_elr.core.observation import Observation
from pytest_elr.core.specs import ClusterSpec, TopicSpec


def expectation_of(obs: Observation) -> dict[str, Any]:
    """A step's ``expect`` for the state ``obs`` (leader ``none`` when leaderless); the topic's other
    partitions under ``partitions``, one key a partition (``partitions_of`` groups equal ones)."""
    expect = {**_partition_expectation(obs), "fenced": list(obs.fenced)}
    if obs.partitions:
        expect["partitions"] = {i: _partition_expectation(o) for i, o in sorted(obs.partitions.items())}
    return expect


def _partition_expectation(obs: Observation) -> dict[str, Any]:
    return {"leader": "none" if obs.leader is None else obs.leader, "isr": list(obs.isr), "elr": list(obs.elr),
            "last_known_elr": list(obs.last_known_elr)}


def partitions_of(by_partition: dict[int, dict[str, Any]]) -> dict[int | str, dict[str, Any]]:
    """``partitions: {p: {...}}`` with the partitions that expect the same written once, as a set
    (``"1,3"``): a 50-partition topic's step reads as a few lines, not 50."""
    groups: dict[str, list[int]] = {}
    values: dict[str, dict[str, Any]] = {}
    for p, expected in sorted(by_partition.items()):
        key = repr(sorted(expected.items()))
        groups.setdefault(key, []).append(p)
        values[key] = expected
    return {(ps[0] if len(ps) == 1 else ",".join(map(str, ps))): values[key] for key, ps in groups.items()}


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
            expect = dict(expectations[i - 1])
            if expect.get("partitions"):
                expect["partitions"] = partitions_of(expect["partitions"])
            elif "partitions" in expect:
                del expect["partitions"]
            step["expect"] = expect
        steps.append(step)
    doc = {
        "name": name,
        "description": description,
        **({"profiles": profiles} if profiles else {}),
        "cluster": {"brokers": list(cluster.brokers), "controllers": cluster.controllers,
                    **({"log_dirs": log_dirs} if log_dirs > 1 else {})},
        "topic": _topic_yaml(topic),
        "steps": steps,
        "verdict": {"acked_loss": "none",
                    "by_profile": {p: {"acked_loss": v} for p, v in verdict_by_profile.items()}},
    }
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=100)


def _topic_yaml(topic: TopicSpec) -> dict[str, Any]:
    doc: dict[str, Any] = {"name": topic.name}
    if topic.more_partitions:  # every partition's replicas written out: the language checks them as given
        doc["partitions"] = topic.partitions
        doc["assignment"] = {p: list(r) for p, r in enumerate(topic.assignment)}
    else:
        doc["replicas"] = list(topic.replicas)
    doc["min_insync_replicas"] = topic.min_insync_replicas
    return doc
