"""Harness mutants: each is a way the harness has been (or could be) blind, planted in a fake
system under test, and each must be killed by the one check aimed at it.

The fake system is the model itself, presented as a backend that is *not* its own oracle: the
executor holds it to a second model exactly as it holds Kafka. A mutant changes what the fake
reports (a field never read, a produce's outcome from the wrong send, a final read cut short...).
Each row names the check that must fail the run, and shows that check is the one that kills it:
with that check switched off, the same run no longer fails that way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fake_backend import (
    REASSIGNING,
    SILENT,
    DrainStopsEarly,
    EarlierReadsSeeNothing,
    ElrElectionsUncounted,
    Fake,
    HwmAdvancesUnderMinIsr,
    HwmBehindAcknowledged,
    HwmFromLaggingReplica,
    LastKnownElrIgnored,
    LeaderEpochBumpedOnElrChange,
    PartitionEpochNotBumped,
    ProduceOutcomeOverwritten,
    ReassignmentNotRead,
    RecoveringNotRead,
    ReplicasOfTheStart,
)

from pytest_elr.scenario import executor
from pytest_elr.scenario.executor import Executor, RunResult, run_scenario
from pytest_elr.scenario.loader import load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parents[1]

@dataclass(frozen=True)
class Mutant:
    name: str
    backend: type[Fake]
    scenario: Callable[[], Any]
    profile: str
    killed_by: str  # what the failing run says: the check aimed at the mutant
    check_off: Callable[[pytest.MonkeyPatch], None]  # switches that check off


def _ignore_differences(mp: pytest.MonkeyPatch) -> None:
    note = Executor._note

    def record_only(self: Executor, d: executor.Difference, ctx: executor.StepContext) -> None:
        note(self, d, executor.StepContext(hwm_before=None))  # recorded, never failing the step
    mp.setattr(Executor, "_note", record_only)


MUTANTS = [
    Mutant("a disagreement ignored", LastKnownElrIgnored, lambda: parse_scenario(SILENT), "kafka",
           "after crash, the system differs from the model in last_known_elr", _ignore_differences),
    Mutant("recovering not read", RecoveringNotRead, lambda: parse_scenario(SILENT), "kafka",
           "after restart, the system differs from the model in recovering",
           lambda mp: mp.setattr(executor, "STATE_FIELDS", tuple(f for f in executor.STATE_FIELDS
                                                                  if f != "recovering"))),
    Mutant("the leader epoch not compared", LeaderEpochBumpedOnElrChange, lambda: parse_scenario(SILENT), "kafka",
           "the system differs from the model in leader_epoch",
           lambda mp: mp.setattr(executor, "STATE_FIELDS", tuple(f for f in executor.STATE_FIELDS
                                                                  if f != "leader_epoch"))),
    Mutant("the partition epoch not compared", PartitionEpochNotBumped, lambda: parse_scenario(SILENT), "kafka",
           "the system differs from the model in partition_epoch: model moved, observed unchanged (0 -> 0)",
           lambda mp: mp.setattr(executor, "STATE_FIELDS", tuple(f for f in executor.STATE_FIELDS
                                                                  if f != "partition_epoch"))),
    Mutant("the reassignment under way not compared", ReassignmentNotRead, lambda: parse_scenario(REASSIGNING),
           "kafka", "after reassign, the system differs from the model in adding",
           lambda mp: mp.setattr(executor, "STATE_FIELDS", tuple(f for f in executor.STATE_FIELDS
                                                                  if f not in ("adding", "removing")))),
    Mutant("the replicas not compared", ReplicasOfTheStart, lambda: parse_scenario(REASSIGNING), "kafka",
           "after reassign, the system differs from the model in replicas",
           lambda mp: mp.setattr(executor, "STATE_FIELDS", tuple(f for f in executor.STATE_FIELDS
                                                                  if f != "replicas"))),
    Mutant("a produce outcome overwritten", ProduceOutcomeOverwritten, lambda: parse_scenario(SILENT), "kafka",
           "after produce, the system differs from the model in produce: "
           "model 3 not_enough_replicas, observed 5 acknowledged",
           lambda mp: mp.setattr(Executor, "_hold_produce_to_model", lambda *a: None)),
    Mutant("a drain that stops early", DrainStopsEarly, lambda: parse_scenario(SILENT), "kafka",
           "the final read stopped at offset", lambda mp: mp.setattr(Executor, "_check_final_read", lambda *a: None)),
    Mutant("the HWM read from a lagging replica", HwmFromLaggingReplica, lambda: parse_scenario(SILENT), "kafka",
           "invariant hwm_monotonic broken on the observed state",
           lambda mp: mp.setattr(executor, "observed_invariants", lambda *a, **k: [])),
    Mutant("the HWM not compared", HwmAdvancesUnderMinIsr, lambda: parse_scenario(SILENT), "kafka",
           "after step end, the system differs from the model in hwm: model frozen at 5",
           lambda mp: mp.setattr(executor, "STATE_FIELDS", tuple(f for f in executor.STATE_FIELDS if f != "hwm"))),
    Mutant("the HWM behind acknowledged records", HwmBehindAcknowledged, lambda: parse_scenario(SILENT), "kafka",
           "the system differs from the model in hwm: model at least 5 (acks=all records acknowledged below it), "
           "observed 4",
           lambda mp: mp.setattr(Executor, "_least_hwm", lambda self: None)),
    Mutant("an election from the ELR not counted", ElrElectionsUncounted,
           lambda: load_scenario(ROOT / "scenarios" / "kip966_t0_t7_walkthrough.elr.yaml"), "kafka",
           "after step end, the system differs from the model in elr_elections: model 1, observed 0",
           lambda mp: mp.setattr(Executor, "_hold_election_counts_to_model", lambda *a: None)),
    Mutant("a loss judged by absence only", EarlierReadsSeeNothing,
           lambda: load_scenario(ROOT / "scenarios" / "kip966_last_replica_standing.elr.yaml"), "legacy",
           "the loss is not proved by presence",
           lambda mp: mp.setattr(executor, "unproved_loss", lambda *a: None)),
]


def _run(m: Mutant, backend: type[Fake]) -> RunResult:
    return run_scenario(m.scenario(), backend(), m.profile)


@pytest.mark.parametrize("m", MUTANTS, ids=[m.name for m in MUTANTS])
def test_the_unmutated_fake_passes(m: Mutant) -> None:
    result = _run(m, Fake)
    assert result.passed, result.message
    assert not result.disagreements and not result.declared


@pytest.mark.parametrize("m", MUTANTS, ids=[m.name for m in MUTANTS])
def test_each_mutant_is_killed_by_the_check_aimed_at_it(m: Mutant, monkeypatch: pytest.MonkeyPatch) -> None:
    result = _run(m, m.backend)
    assert not result.passed and m.killed_by in result.message, result.message
    m.check_off(monkeypatch)
    survived = _run(m, m.backend)
    assert m.killed_by not in survived.message, f"{m.name}: still killed with its check off: {survived.message}"
