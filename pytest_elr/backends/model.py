"""The ``model`` backend: scenarios run in-process against the reference model."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import ClassVar

from pytest_elr.actions import Action
from pytest_elr.backends.base import Backend, Session
from pytest_elr.core.history import History
from pytest_elr.core.observation import Observation, Read, Result
from pytest_elr.core.outcomes import classify
from pytest_elr.core.specs import ClusterSpec, TopicSpec
from pytest_elr.model import build_model
from pytest_elr.model.cluster import ModelCluster
from pytest_elr.model.profiles import PROFILE_NAMES, Rules, get_profile


class ModelBackend(Backend):
    name: ClassVar[str] = "model"
    profiles: ClassVar[frozenset[str]] = frozenset(PROFILE_NAMES)
    settles_instantly: ClassVar[bool] = True
    many_partitions: ClassVar[bool] = True

    def __init__(self, session: Session | None = None, version: str | None = None, rules: Rules | None = None) -> None:
        self._rules = rules  # a mutant of the oracle (see pytest_elr.model.mutants)
        self.model: ModelCluster | None = None
        self.history: History | None = None
        self._seen_errors = 0
        self._sends_recorded = 0

    @classmethod
    def handled_actions(cls) -> set[type]:
        return ModelCluster.handled_actions()

    def start(self, cluster: ClusterSpec, topic: TopicSpec, profile: str, history: History) -> None:
        prof = get_profile(profile)
        if self._rules is not None:
            prof = replace(prof, rules=self._rules)
        self.model = build_model(cluster, topic, prof)
        self.history = history

    def own_model(self) -> ModelCluster | None:
        return self.model

    def apply(self, action: Action) -> Result:
        model = self._model()
        first_send = len(model.send_log)
        result = model.apply(action)
        self._record_sends(first_send)  # a produce's records; nothing for any other action
        self._record_completions()
        return result

    def observe(self) -> Observation:
        return self._model().observe()

    def unsynced_bytes(self) -> dict[int, int]:
        """Per broker, the records (the model has no bytes) a power off would lose right now."""
        unsynced: dict[int, int] = {}
        for p in self._model().partitions.values():
            for b, log in p.logs.items():
                unsynced[b] = unsynced.get(b, 0) + log.leo - log.flushed
        return unsynced

    def election_counts(self) -> dict[str, int]:
        return self._model().ctx.elections.as_dict()

    def protocol_errors(self) -> list[str]:
        model = self._model()
        errors = model.protocol_errors[self._seen_errors :]
        self._seen_errors = len(model.protocol_errors)
        return errors

    def drain(self) -> Read:
        return self.read(0)

    def drain_partitions(self) -> dict[int, Read]:
        return {i: self.read(0, i) for i in self._model().partitions}

    def read(self, start: int, partition: int = 0) -> Read:
        model = self._model()
        p = model.partitions[partition]
        leader = p.leader_replica()
        if leader is None or p.part.leader in model.fenced:
            return Read([], None)  # no leader to read from
        return Read(model.drain(partition)[start:], leader.hwm)

    def read_partitions(self, starts: Mapping[int, int]) -> dict[int, Read]:
        return {i: self.read(start, i) for i, start in starts.items()}

    def close(self) -> None:
        self.model = None

    # --- history -------------------------------------------------------------------------

    def _model(self) -> ModelCluster:
        if self.model is None:
            raise RuntimeError("the model backend was not started")
        return self.model

    def _record_sends(self, first: int) -> None:
        model, history = self._model(), self.history
        if history is None:
            return
        for i, (partition, send) in enumerate(model.send_log[first:], start=first):
            history.record("produce", op="invoke", id=i, value=send.value, acks=send.acks,
                           partition=partition, offset=None, error=None)

    def _record_completions(self) -> None:
        model, history = self._model(), self.history
        if history is None:
            return
        # Sends complete in order (within a partition; across partitions an answer waits for the
        # sends before it), so everything before the first pending one is final.
        while self._sends_recorded < len(model.send_log):
            partition, send = model.send_log[self._sends_recorded]
            if send.status == "pending":
                break
            if send.status == "ok":
                history.record("produce", op="ok", id=self._sends_recorded, value=send.value,
                               acks=send.acks, partition=partition, offset=send.offset, error=None,
                               outcome=classify(None, send.acks))
            elif send.status == "fail":
                history.record("produce", op="fail", id=self._sends_recorded, value=send.value,
                               acks=send.acks, partition=partition, offset=None, error=send.error,
                               outcome=classify(send.error, send.acks))
            self._sends_recorded += 1
