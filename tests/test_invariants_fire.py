"""Every invariant fires: each one, on the model and on the observed state, is shown catching the
violation it exists for -- planted in a model state reached by real actions, or produced by a
broken rule -- and it is the first (mostly the only) invariant to report it. A new invariant
without a planted violation here fails ``test_every_invariant_has_a_planted_violation``."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable

import pytest

from pytest_elr.actions import Cut, Heal, Produce, ReplaceDisk, Slow, UncleanElection
from pytest_elr.core.nodes import CONTROLLER, isolation_links
from pytest_elr.core.observation import Observation
from pytest_elr.model import controller, invariants
from pytest_elr.model.cluster import ModelCluster
from pytest_elr.model.mutants import pending_member_cut_off
from pytest_elr.model.profiles import Rules, get_profile, replace_rules
from pytest_elr.model.state import Record
from pytest_elr.scenario.executor import observed_invariants

BROKERS = (0, 1, 2)


def cluster(profile: str = "kip966", min_isr: int = 2, rules: Rules | None = None) -> ModelCluster:
    prof = get_profile(profile) if rules is None else replace_rules(get_profile(profile), rules)
    m = ModelCluster(BROKERS, list(BROKERS), min_isr, prof)
    m.apply(Produce(count=3))
    assert invariants.check(m, len(m.committed)) == []  # a healthy start: the violation is the plant's
    return m


def isolate(m: ModelCluster, *brokers: int) -> None:
    for b in brokers:
        m.apply(Cut(links=isolation_links(b, "all", BROKERS)))


# Each builder returns the state with the violation planted, and the HWM the step before saw.
Planted = tuple[ModelCluster, int | None]


def _elr_disjoint_from_isr(mp: pytest.MonkeyPatch) -> Planted:
    m = cluster(min_isr=3)
    isolate(m, 2)  # ISR [0, 1] < min ISR 3: 2 joins the ELR
    m.part.elr = [1, 2]
    return m, None


def _elr_empty_at_min_isr(mp: pytest.MonkeyPatch) -> Planted:
    m = cluster()
    isolate(m, 2)  # ISR [0, 1] meets min ISR 2: 2 stays out of the ELR (Case F)
    m.part.elr = [2]
    return m, None


def _no_elr_without_feature(mp: pytest.MonkeyPatch) -> Planted:
    m = cluster("legacy")
    isolate(m, 2)
    m.part.elr = [2]
    return m, None


def _isr_plus_elr_at_min_isr(mp: pytest.MonkeyPatch) -> Planted:
    m = cluster()
    isolate(m, 1, 2)  # ISR [0], ELR [2]
    m.part.elr = []  # the ELR member forgotten without an unclean registration
    return m, None


def _leader_unfenced(mp: pytest.MonkeyPatch) -> Planted:
    m = cluster("legacy")
    m.fenced.add(0)
    return m, None


def _no_stale_epoch_in_isr(mp: pytest.MonkeyPatch) -> Planted:
    # KIP-903's race (scenarios/kip903_stale_broker_epoch.elr.yaml) with the broker-epoch check
    # switched off: the leader's held AlterPartition adds follower 1 with the epoch it had before
    # its disk was replaced, and the controller takes it.
    pair = (0, 1)
    m = ModelCluster(pair, list(pair), 1, replace_rules(get_profile("kip966"), Rules(check_broker_epoch=False)))
    m.apply(Produce(count=10))
    m.apply(Cut(links=isolation_links(1, "brokers", pair)))
    m.apply(Produce(count=10))
    m.apply(Slow(links=((0, CONTROLLER),)))
    m.apply(Heal(links=((0, 1), (1, 0))))
    m.apply(Cut(links=isolation_links(1, "brokers", pair)))
    m.apply(ReplaceDisk(broker=1))
    m.apply(Heal(links=None))  # the late request lands as 1 fetches again
    return m, None


def _unclean_exclusion(mp: pytest.MonkeyPatch) -> Planted:
    m = cluster()
    m.partition.unclean_restarted.add(1)  # ISR member 1 registered after an unclean shutdown
    return m, None


def _isr_unfenced(mp: pytest.MonkeyPatch) -> Planted:
    m = cluster()
    m.fenced.add(2)  # fenced, but left in the ISR
    return m, None


def _leader_in_isr(mp: pytest.MonkeyPatch) -> Planted:
    m = cluster()
    m.part.isr = [1, 2]
    return m, None


def _registering_broker_out_of_isr(mp: pytest.MonkeyPatch) -> Planted:
    m = cluster()
    m.brokers[1].registered = False  # back, not registered, still in the ISR
    return m, None


def _elr_from_isr(mp: pytest.MonkeyPatch) -> Planted:
    # ELR update rule 2 broken: every replica outside the proposed ISR joins the ELR, also one that
    # had left the ISR while it met min ISR (Case F: not complete).
    def every_outsider(part: controller.PartitionRecord, proposed: list[int],
                       ctx: controller.ControllerContext) -> None:
        part.elr = part.ordered(set(part.replicas) - set(proposed))

    mp.setattr(controller, "extend_elr_under_min_isr", every_outsider)
    m = cluster()
    isolate(m, 2)  # ISR [0, 1]: 2 is out, not in the ELR
    isolate(m, 1)  # ISR [0]: 1 joins the ELR, and (wrongly) 2
    return m, None


def _unclean_election_recovers(mp: pytest.MonkeyPatch) -> Planted:
    # An unclean election that forgets to mark the partition RECOVERING.
    elect = controller.maybe_elect

    def unmarked(part: controller.PartitionRecord, ctx: controller.ControllerContext) -> None:
        elect(part, ctx)
        part.recovering = False

    mp.setattr(controller, "maybe_elect", unmarked)
    m = cluster("legacy")
    isolate(m, 1, 2)  # ISR [0]
    m.apply(Cut(links=isolation_links(0, "all", BROKERS)))  # the last ISR member gone: leaderless
    m.apply(Heal(links=isolation_links(1, "all", BROKERS)))
    m.apply(UncleanElection(enabled=True))  # 1, outside the ISR [0], is elected
    return m, None


def _isr_joins_hold_hwm(mp: pytest.MonkeyPatch) -> Planted:
    # The HWM over the committed ISR only: records 5-9 went under it while 1, the pending member, was
    # cut off; the held AlterPartition then lands and adds 1 without them.
    m = pending_member_cut_off(Rules(hwm_waits_for_maximal_isr=False))
    m.apply(Heal(links=None))
    return m, None


def _hwm_only_at_min_isr(mp: pytest.MonkeyPatch) -> Planted:
    m = cluster(rules=Rules(hwm_requires_min_isr=False))
    isolate(m, 1, 2)  # ISR [0] < min ISR 2
    m.apply(Produce(count=2, acks="1"))
    return m, None


def _acked_on_min_isr(mp: pytest.MonkeyPatch) -> Planted:
    # The HWM taken as the leader's log end, not what the maximal ISR holds.
    mp.setattr(controller, "advance_hwm", lambda hwm, ends: max(hwm, *ends))
    m = cluster()
    m.apply(Slow(links=(*isolation_links(1, "brokers", BROKERS), *isolation_links(2, "brokers", BROKERS),
                        (0, CONTROLLER))))  # followers stop fetching; the ISR shrink is held
    m.apply(Produce(count=2))
    return m, None


def _leader_completeness(mp: pytest.MonkeyPatch) -> Planted:
    m = cluster()
    del m.logs[0].log[2:]
    return m, None


def _candidates_hold_hwm(mp: pytest.MonkeyPatch) -> Planted:
    m = cluster()
    del m.logs[1].log[1:]
    m.logs[1].hwm = 0
    return m, None


def _log_matching(mp: pytest.MonkeyPatch) -> Planted:
    m = cluster()
    isolate(m, 2)  # 2 leaves, neither ISR nor ELR
    m.logs[2].log = [Record("x", 1), Record("y", 1)]  # claims a committed prefix it does not have
    m.logs[2].hwm = 2
    return m, None


def _hwm_monotonic(mp: pytest.MonkeyPatch) -> Planted:
    m = cluster()
    return m, (m.hwm() or 0) + 1


def _no_acked_loss(mp: pytest.MonkeyPatch) -> Planted:
    m = cluster()
    m.partition.acked.append(Record("ghost", 1))  # acknowledged, in no log
    return m, None


def _last_known_elr_quorum(mp: pytest.MonkeyPatch) -> Planted:
    m = cluster()
    isolate(m, 1, 2)
    m.apply(Cut(links=isolation_links(0, "all", BROKERS)))  # ISR [], ELR [0, 2]
    assert (m.part.isr, m.part.elr) == ([], [0, 2])
    # 2 registered uncleanly (the seeds' exception to ISR + ELR >= min ISR), and LastKnownELR lost it
    m.part.elr, m.part.last_known_elr = [], [0]
    m.partition.quorum_shrunk_by = "broker 2 registered after an unclean shutdown"
    return m, None


PLANTED: dict[str, Callable[[pytest.MonkeyPatch], Planted]] = {
    "elr_disjoint_from_isr": _elr_disjoint_from_isr,
    "elr_empty_at_min_isr": _elr_empty_at_min_isr,
    "no_elr_without_feature": _no_elr_without_feature,
    "isr_plus_elr_at_min_isr": _isr_plus_elr_at_min_isr,
    "leader_unfenced": _leader_unfenced,
    "no_stale_epoch_in_isr": _no_stale_epoch_in_isr,
    "elr_from_isr": _elr_from_isr,
    "unclean_election_recovers": _unclean_election_recovers,
    "unclean_exclusion": _unclean_exclusion,
    "isr_unfenced": _isr_unfenced,
    "leader_in_isr": _leader_in_isr,
    "registering_broker_out_of_isr": _registering_broker_out_of_isr,
    "isr_joins_hold_hwm": _isr_joins_hold_hwm,
    "hwm_only_at_min_isr": _hwm_only_at_min_isr,
    "acked_on_min_isr": _acked_on_min_isr,
    "leader_completeness": _leader_completeness,
    "candidates_hold_hwm": _candidates_hold_hwm,
    "log_matching": _log_matching,
    "hwm_monotonic": _hwm_monotonic,
    "no_acked_loss": _no_acked_loss,
    "last_known_elr_quorum": _last_known_elr_quorum,
}

#: planted violations that break more than the named invariant (it must still be reported first)
ALSO_BROKEN: dict[str, set[str]] = {
    "no_stale_epoch_in_isr": {"isr_joins_hold_hwm"},  # 1 joined with its new, empty disk
    "acked_on_min_isr": {"candidates_hold_hwm"},  # the followers that left lack what was acknowledged
    "leader_completeness": {"candidates_hold_hwm", "log_matching", "no_acked_loss"},  # the leader lost them
}


def test_every_invariant_has_a_planted_violation() -> None:
    assert list(PLANTED) == list(invariants.INVARIANTS)


@pytest.mark.parametrize("name", list(PLANTED))
def test_invariant_fires_on_its_violation(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    m, last_hwm = PLANTED[name](monkeypatch)
    fired = [v.invariant for v in invariants.check(m, last_hwm)]
    assert fired and fired[0] == name, fired
    assert set(fired) == {name} | ALSO_BROKEN.get(name, set()), fired


@pytest.mark.parametrize("name", list(PLANTED))
def test_a_silenced_invariant_does_not_fire(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    m, last_hwm = PLANTED[name](monkeypatch)
    with invariants.silenced(name):
        assert name not in [v.invariant for v in invariants.check(m, last_hwm)]
    assert name in [v.invariant for v in invariants.check(m, last_hwm)]  # back once the block ends


# --- the invariants on the observed state (``observed_invariants`` in scenario/executor.py) ---

OBSERVED_NAMES = re.findall(r'broken\("(\w+)"', inspect.getsource(observed_invariants))


def _obs(**fields: object) -> Observation:
    base: dict[str, object] = {"leader": 0, "leader_epoch": 1, "isr": (0, 1), "elr": (), "last_known_elr": (),
                               "fenced": (), "hwm": 10, "leo": {0: 10, 1: 10}}
    return Observation(**{**base, **fields})  # type: ignore[arg-type]


#: each observed invariant: its planted observation and the profile's ELR flag
OBSERVED: dict[str, tuple[Observation, bool]] = {
    "elr_disjoint_from_isr": (_obs(isr=(0,), elr=(0,)), True),
    "elr_empty_at_min_isr": (_obs(isr=(0, 1), elr=(2,)), True),
    "no_elr_without_feature": (_obs(isr=(0,), elr=(1,)), False),
    "leader_unfenced": (_obs(fenced=(0,)), True),
    "hwm_monotonic": (_obs(hwm=4, leo={0: 10, 1: 10}), True),
    "leader_log_covers_hwm": (_obs(leo={0: 9, 1: 10}, hwm=10), True),
}


def test_every_observed_invariant_has_a_planted_violation() -> None:
    assert OBSERVED_NAMES and list(OBSERVED) == OBSERVED_NAMES


@pytest.mark.parametrize("name", list(OBSERVED))
def test_observed_invariant_fires_alone_on_its_violation(name: str) -> None:
    obs, elr = OBSERVED[name]
    found = observed_invariants(obs, elr=elr, min_isr=2, hwm_before=("T0", 5))
    assert [v.split()[1] for v in found] == [name]
    healthy = observed_invariants(_obs(), elr=elr, min_isr=2, hwm_before=("T0", 5))
    assert healthy == []
