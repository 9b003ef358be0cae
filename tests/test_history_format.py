"""The history format read back in plain Python: every event type, loss evidence, the fault bit, a saved verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_elr.checker import check_history
from pytest_elr.checker.synth import SyntheticHistory, every_event_type, meta, write_history
from pytest_elr.checker.verdict import Verdict
from pytest_elr.core.history import EVENT_TYPES, VERDICT_FILE, Run
from pytest_elr.core.observation import LossEvidence, fault_bit


def test_every_event_type_is_read(tmp_path: Path) -> None:
    run = Run.read(Path(write_history(tmp_path / "all", meta(run_id="all"), every_event_type().events)))
    assert run.malformed == 0 and {e["type"] for e in run.events} == set(EVENT_TYPES)
    assert (run.run_id, run.outcome) == ("all", "passed")
    assert run.losses == [LossEvidence(broker=3, leo_before=1, leo_after=0)]


def test_unusable_lines_are_counted_and_skipped(tmp_path: Path) -> None:
    h = SyntheticHistory().send(0, 0)
    h.raw("not json\n").raw('{"t": 1.0, "type": "teleport"}\n').raw('{"t": 1.1, "type": "consume", "value": "v0"}\n')
    run = Run.read(Path(write_history(tmp_path / "r", meta(), h.read(0, "v0").events)))
    assert run.malformed == 3 and [e["type"] for e in run.events] == ["produce", "produce", "consume"]


def test_loss_evidence_round_trips_through_its_event() -> None:
    loss = LossEvidence(broker=2, leo_before=10, leo_after=7, bytes_lost=300)
    event = loss.as_event()
    assert event == {"broker": 2, "leo_before": 10, "leo_after": 7, "leo_restart": None, "records_lost": 3,
                     "bytes_lost": 300}
    assert LossEvidence.from_event({"type": "loss_evidence", **event}) == loss


@pytest.mark.parametrize(("losses", "bit"), [
    ([], "-"),
    ([LossEvidence(1, 5, 5), LossEvidence(2, None, None, bytes_lost=0)], "NO"),
    ([LossEvidence(1, 5, 5), LossEvidence(2, 5, 3)], "yes"),
    # bytes dropped under the partition directory are not records lost (indexes, checkpoints)
    ([LossEvidence(2, None, None, bytes_lost=512)], "NO"),
])
def test_fault_bit(losses: list[LossEvidence], bit: str) -> None:
    assert fault_bit(losses) == bit


def test_a_saved_verdict_reads_back(tmp_path: Path) -> None:
    assert Verdict.load(tmp_path) is None  # no checker judged it
    verdict = check_history(SyntheticHistory().send(0, 0).send(1, 1).read(0, "v0").events)  # type: ignore[arg-type]
    verdict.save(tmp_path)
    assert (tmp_path / VERDICT_FILE).is_file() and Verdict.load(tmp_path) == verdict
    assert verdict.lost == [("v1", 1)] and verdict.examples() == "v1@1"
    (tmp_path / VERDICT_FILE).write_text("{broken")
    assert Verdict.load(tmp_path) is None


def test_every_event_type_written_is_a_listed_type() -> None:
    """Each ``<history>.record("<type>", ...)`` in the package names a type of EVENT_TYPES, so neither
    the reader nor the checker calls a written event malformed (a ``declared_difference`` once was)."""
    import ast

    root = Path(__file__).resolve().parent.parent / "pytest_elr"
    written: dict[str, str] = {}
    for file in root.rglob("*.py"):
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "record"
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                written[node.args[0].value] = f"{file.relative_to(root)}:{node.lineno}"
    assert {"declared_difference", "disagreement", "produce", "consume"} <= set(written)
    assert {t: where for t, where in written.items() if t not in EVENT_TYPES} == {}


def test_a_history_closes_without_waiting_for_its_columnar_copy(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """close() starts the copy and returns; columnar.wait() (which the checker calls before reading)
    returns once it is made."""
    import threading

    from pytest_elr.core import columnar
    from pytest_elr.core.history import EVENTS_FILE, History

    began, release, made = threading.Event(), threading.Event(), []

    def slow_write(events_file: Path, **_: object) -> bool:
        began.set()
        release.wait(20)
        made.append(Path(events_file))
        return True

    monkeypatch.setattr(columnar, "write", slow_write)
    history = History.create(tmp_path, scenario="s", profile="kafka")
    history.record("produce", op="ok", id=1, value="v1", acks="all")
    history.close("passed")
    assert began.wait(20) and made == []  # the copy is under way and close() has returned
    waiter = threading.Thread(target=columnar.wait)
    waiter.start()
    waiter.join(0.5)
    assert waiter.is_alive()  # wait() waits for the copy (always alive here: the copy is held)
    release.set()
    waiter.join(20)
    assert not waiter.is_alive() and history.directory is not None
    assert made == [history.directory / EVENTS_FILE]


def test_a_copy_made_in_the_background_is_fresh_once_waited_for(tmp_path: Path) -> None:
    from pytest_elr.core import columnar

    path = write_history(tmp_path / "run", meta(run_id="run"), SyntheticHistory().send(0, 0).read(0, "v0").events)
    events = Path(path) / "events.jsonl"
    columnar.write_later(events, min_bytes=0)
    columnar.wait()
    assert columnar.fresh(events)
