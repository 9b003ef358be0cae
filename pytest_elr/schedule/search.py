"""Random fault schedules against the model, with Hypothesis' stateful testing.

The machine applies the language's actions in random order and checks the model's invariants
after each. Under ``kip966`` and ``kafka`` no invariant may break while at most min ISR - 1
unclean shutdowns happen; under ``legacy`` Hypothesis finds an acks=all loss and shrinks it,
and ``write_counterexample`` turns the shrunk schedule into a runnable YAML scenario.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from pytest_elr.actions import Action, Crash, Cut, Flush, Heal, PowerOff, Produce, ReplaceDisk, Restart, Shutdown, Slow
from pytest_elr.core.nodes import CONTROLLER, isolation_links
from pytest_elr.model import invariants
from pytest_elr.model.cluster import ModelCluster, ModelError
from pytest_elr.model.profiles import Profile, Rules, get_profile

BROKERS = (0, 1, 2)
MIN_ISR = 2
#: kinds of fault a schedule may use; each example enables a random subset ("swarm testing",
#: Groce et al.), which finds bugs that need many faults of a few kinds far sooner
VICTIMS = st.one_of(st.just("leader"), st.just("leader"), st.sampled_from(BROKERS))
#: lossy shutdowns are the interesting ones: drawn more often than a crash
UNCLEAN_KINDS = st.sampled_from(["power_off", "power_off", "replace_disk", "crash"])
KINDS = ("isolate", "slow", "hold", "heal", "shutdown", "unclean", "restart", "flush")


def _enabled(kind: str):  # type: ignore[no-untyped-def]
    return precondition(lambda self: kind in self.enabled)


@dataclass
class SearchConfig:
    profile: Profile
    brokers: tuple[int, ...] = BROKERS
    min_isr: int = MIN_ISR
    #: unclean shutdowns (crash, power off, replace disk) allowed in one schedule
    unclean_budget: int = MIN_ISR - 1


class InvariantBroken(AssertionError):
    pass


class ProtocolMachine(RuleBasedStateMachine):
    config: ClassVar[SearchConfig]
    #: actions of the most recent run; after a failure, Hypothesis replays the shrunk example
    #: last, so this holds the minimal counterexample
    last_actions: ClassVar[list[Action]] = []
    last_violations: ClassVar[list[str]] = []

    def __init__(self) -> None:
        super().__init__()
        cfg = self.config
        self.model = ModelCluster(cfg.brokers, list(cfg.brokers), cfg.min_isr, cfg.profile)
        self.actions: list[Action] = []
        self.unclean = 0
        self.enabled: frozenset[str] = frozenset(KINDS)
        type(self).last_actions = self.actions
        type(self).last_violations = []

    def _do(self, action: Action) -> None:
        try:
            self.model.apply(action)
        except ModelError:
            return  # not applicable in this state: a no-op step
        self.actions.append(action)

    def _target(self, victim: int | str) -> int | None:
        """Jepsen-style targeting: faults aimed at the current leader find bugs sooner."""
        return self.model.part.leader if victim == "leader" else int(victim)

    def _running(self, b: int) -> bool:
        return self.model.brokers[b].running

    # --- rules ---------------------------------------------------------------------------------

    @initialize(kinds=st.sets(st.sampled_from(KINDS), min_size=2))
    def choose_fault_kinds(self, kinds: set[str]) -> None:
        self.enabled = frozenset(kinds)

    @rule(count=st.integers(1, 5), acks=st.sampled_from(["all", "all", "1"]))
    def produce(self, count: int, acks: str) -> None:
        self._do(Produce(count=count, acks=acks))  # type: ignore[arg-type]

    @_enabled('isolate')
    @rule(victim=VICTIMS, scope=st.sampled_from(["all", "brokers", "controller"]))
    def isolate(self, victim: int | str, scope: str) -> None:
        b = self._target(victim)
        if b is not None:
            self._do(Cut(links=isolation_links(b, scope, self.config.brokers)))  # type: ignore[arg-type]

    @_enabled('slow')
    @rule(b=st.sampled_from(BROKERS))
    def slow(self, b: int) -> None:
        self._do(Slow(links=isolation_links(b, "brokers", self.config.brokers)))

    @_enabled('hold')
    @rule(b=st.sampled_from(BROKERS))
    def hold_alter_partition(self, b: int) -> None:
        self._do(Slow(links=((b, CONTROLLER),)))

    @_enabled('heal')
    @rule(b=st.sampled_from(BROKERS))
    def heal_broker(self, b: int) -> None:
        self._do(Heal(links=isolation_links(b, "all", self.config.brokers)))

    @_enabled('heal')
    @rule()
    def heal_all(self) -> None:
        self._do(Heal(links=None))

    @_enabled('shutdown')
    @rule(b=st.sampled_from(BROKERS))
    def shutdown(self, b: int) -> None:
        if self._running(b):
            self._do(Shutdown(broker=b))

    @_enabled('unclean')
    @rule(victim=VICTIMS, kind=UNCLEAN_KINDS)
    def unclean_shutdown(self, victim: int | str, kind: str) -> None:
        b = self._target(victim)
        if b is None or not self._running(b):
            return
        # Only victims the protocol relies on count against the tolerance (as in the invariants).
        if b in self.model.trusted():
            if self.unclean >= self.config.unclean_budget:
                return
            self.unclean += 1
        action = {"crash": Crash(broker=b), "power_off": PowerOff(brokers=(b,)),
                  "replace_disk": ReplaceDisk(broker=b)}[kind]
        self._do(action)

    @_enabled('restart')
    @rule(b=st.sampled_from(BROKERS))
    def restart(self, b: int) -> None:
        if not self._running(b):
            self._do(Restart(broker=b))

    @_enabled('flush')
    @rule(b=st.sampled_from(BROKERS))
    def flush(self, b: int) -> None:
        self._do(Flush(broker=b))

    @precondition(lambda self: len(self.actions) > 0)
    @invariant()
    def protocol_invariants(self) -> None:
        found = invariants.check(self.model, len(self.model.committed))
        if found:
            type(self).last_violations = [str(v) for v in found]
            raise InvariantBroken("\n".join(str(v) for v in found))


def machine_for(cfg: SearchConfig) -> type[ProtocolMachine]:
    return type(f"ProtocolMachine_{cfg.profile.name}", (ProtocolMachine,), {"config": cfg})


def search(
    profile: str | Profile,
    max_examples: int = 300,
    steps: int = 25,
    rules: Rules | None = None,
) -> tuple[list[Action], list[str]] | None:
    """Explore random schedules; return the shrunk counterexample (actions, violations), if any.

    Derandomized: the same arguments explore the same schedules, so a result can be reproduced.
    """
    prof = get_profile(profile) if isinstance(profile, str) else profile
    if rules is not None:
        prof = replace(prof, rules=rules)
    machine = machine_for(SearchConfig(profile=prof))
    run_settings = settings(
        max_examples=max_examples, stateful_step_count=steps, deadline=None, database=None,
        suppress_health_check=list(HealthCheck), derandomize=True, print_blob=False,
    )
    try:
        run_state_machine_as_test(machine, settings=run_settings)
    except InvariantBroken:
        return list(machine.last_actions), list(machine.last_violations)
    return None
