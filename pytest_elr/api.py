"""The Python API: script a scenario in a test instead of YAML.

    def test_last_replica_standing(elr_cluster):
        c = elr_cluster(brokers=3, replicas=[0, 1, 2], min_isr=2)
        c.produce(10)
        c.isolate(0)
        c.expect(leader=1, isr=[1, 2], elr=[])
        c.power_off(2)
        ...
        assert not c.verdict().lost

Each call is the same action the YAML language builds, run by the same executor, so
expectations are awaited the same way and every call lands in the run's history.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from pytest_elr.actions import (
    Action,
    Crash,
    Cut,
    Flush,
    Heal,
    Pause,
    PowerOff,
    Produce,
    ReplaceDisk,
    Restart,
    Resume,
    SetMinIsr,
    Shutdown,
    Slow,
    Wait,
)
from pytest_elr.backends.base import Backend
from pytest_elr.checker import Verdict as RunVerdict
from pytest_elr.checker import check_history
from pytest_elr.core.history import History
from pytest_elr.core.nodes import CONTROLLER, IsolationScope, Link, Node, isolation_links
from pytest_elr.core.observation import Observation, ProduceOutcome
from pytest_elr.core.specs import ClusterSpec, TopicSpec
from pytest_elr.scenario.executor import Executor, StepContext
from pytest_elr.scenario.schema import Scenario, Step, Verdict

_counter = itertools.count()


class ClusterHandle:
    def __init__(self, backend: Backend, profile: str, cluster: ClusterSpec, topic: TopicSpec,
                 history_root: Path | None = None, name: str = "python-api") -> None:
        scenario = Scenario(
            name=name, path="<python>", description="", profiles=(profile,), cluster=cluster,
            topic=topic, workload=None, steps=(), verdict=Verdict(),
        )
        self.brokers = cluster.brokers
        self.history = History.create(history_root, scenario=name, scenario_file="<python>",
                                      backend=backend.name, profile=profile, topic=topic.name,
                                      min_insync_replicas=topic.min_insync_replicas)
        self._executor = Executor(scenario, backend, profile, self.history)
        backend.start(cluster, topic, profile, self.history)
        self._executor.model = getattr(backend, "model", None)
        if self._executor.model is None:
            from pytest_elr.backends.model import build_model

            self._executor.model = build_model(cluster, topic, profile)
        self._ctx = StepContext(hwm_before=None)
        self._closed = False

    # --- faults ------------------------------------------------------------------------------

    def cut(self, src: Node, dst: Node, both_ways: bool = False) -> None:
        self._do(Cut(links=_links(src, dst, both_ways)))

    def slow(self, src: Node, dst: Node, latency_ms: int = 5000, both_ways: bool = False) -> None:
        self._do(Slow(links=_links(src, dst, both_ways), latency_ms=latency_ms))

    def heal(self, src: Node | None = None, dst: Node | None = None, both_ways: bool = True) -> None:
        if src is None:
            self._do(Heal(links=None))
        elif dst is None:
            self._do(Heal(links=isolation_links(int(src), "all", self.brokers)))
        else:
            self._do(Heal(links=_links(src, dst, both_ways)))

    def isolate(self, broker: int, from_: IsolationScope = "all") -> None:
        self._do(Cut(links=isolation_links(broker, from_, self.brokers)))

    def shutdown(self, broker: int) -> None:
        self._do(Shutdown(broker=broker))

    def crash(self, broker: int) -> None:
        self._do(Crash(broker=broker))

    def power_off(self, *brokers: int) -> None:
        self._do(PowerOff(brokers=tuple(brokers)))

    def restart(self, broker: int) -> None:
        self._do(Restart(broker=broker))

    def replace_disk(self, broker: int) -> None:
        self._do(ReplaceDisk(broker=broker))

    def pause(self, broker: int) -> None:
        self._do(Pause(broker=broker))

    def resume(self, broker: int) -> None:
        self._do(Resume(broker=broker))

    def flush(self, broker: int) -> None:
        self._do(Flush(broker=broker))

    def set_min_isr(self, value: int) -> None:
        self._do(SetMinIsr(value=value))

    def wait(self, seconds: float) -> None:
        self._do(Wait(seconds=seconds))

    def produce(self, count: int = 1, acks: str = "all") -> ProduceOutcome:
        self._do(Produce(count=count, acks=acks))  # type: ignore[arg-type]
        assert self._ctx.produce is not None
        return self._ctx.produce

    # --- observation ---------------------------------------------------------------------------

    def observe(self) -> Observation:
        return self._executor.backend.observe()

    def unsynced(self) -> dict[int, int]:
        """What each broker would lose to a power off right now (bytes on real Kafka, records on
        the model)."""
        return self._executor.backend.unsynced_bytes()  # type: ignore[attr-defined]

    def expect(self, timeout: float | None = None, **expected: Any) -> Observation:
        """Wait until the partition looks as described (leader=, isr=, elr=, last_known_elr=,
        fenced=, hwm=, produce=, rejected=, lost=, recovering=); raise ScenarioFailure if not."""
        checks: dict[str, Any] = {}
        for key, value in expected.items():
            if key in ("isr", "elr", "last_known_elr", "fenced", "lost"):
                checks[key] = frozenset(value)
            else:
                checks[key] = value
        label = f"expect-{next(_counter)}"
        step = Step(label=label, line=0, actions=(), expect=checks, timeout_s=timeout)
        self._ctx.protocol_errors += self._executor.backend.protocol_errors()
        obs = self._executor.await_expectations(step, self._ctx)
        self._executor.check_invariants(step, obs)
        self._ctx = StepContext(hwm_before=self._executor.last_hwm)
        return obs

    def verdict(self) -> RunVerdict:
        """Heal everything, read the partition back, and judge the acks=all records."""
        ex = self._executor
        ex.finale()
        for record in ex.backend.drain():
            self.history.record("consume", partition=0, offset=record.offset, value=record.value,
                                reader="drain")
        return check_history(self.history.events)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._executor.backend.close()
            self.history.close("closed")

    def _do(self, action: Action) -> None:
        self._executor.apply(action, self._ctx)


def _links(src: Node, dst: Node, both_ways: bool) -> tuple[Link, ...]:
    for node in (src, dst):
        if not isinstance(node, int) and node != CONTROLLER:
            raise ValueError(f"a link joins broker ids or {CONTROLLER!r}, got {node!r}")
    return ((src, dst), (dst, src)) if both_ways else ((src, dst),)
