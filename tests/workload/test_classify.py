"""Error classification and the History lock shim: no cluster needed."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from pytest_elr.core.history import History
from pytest_elr.workload import BackgroundProducer, is_definite, max_acked_offset


@pytest.mark.parametrize("error", ["NOT_ENOUGH_REPLICAS", "NOT_LEADER_FOR_PARTITION", "UNKNOWN_TOPIC_OR_PART",
                                   "_QUEUE_FULL", "_UNKNOWN_PARTITION"])
def test_definite(error: str) -> None:
    assert is_definite(error)


@pytest.mark.parametrize("error", ["NOT_ENOUGH_REPLICAS_AFTER_APPEND", "REQUEST_TIMED_OUT", "_MSG_TIMED_OUT",
                                   "_TIMED_OUT", "_TRANSPORT", "NETWORK_EXCEPTION", "_PURGE_INFLIGHT",
                                   "KAFKA_STORAGE_ERROR", "_STOPPED", "SOMETHING_NEW"])
def test_indeterminate(error: str) -> None:
    assert not is_definite(error)


def test_purged_unsent_is_definite_only_without_retries() -> None:
    assert is_definite("_PURGE_QUEUE", retries=False)
    assert not is_definite("_PURGE_QUEUE", retries=True)


def test_config_checks() -> None:
    with pytest.raises(ValueError, match="acks='all'"):
        BackgroundProducer("127.0.0.1:1", "t", None, rate=1, acks="1", idempotence=True)
    with pytest.raises(ValueError, match="retries"):
        BackgroundProducer("127.0.0.1:1", "t", None, rate=1, idempotence=True, retries=0)
    with pytest.raises(ValueError, match="rate"):
        BackgroundProducer("127.0.0.1:1", "t", None, rate=0)


def test_thread_safe_history_keeps_file_and_memory_in_order(tmp_path: Path) -> None:
    history = History.create(tmp_path, scenario="lock")

    def write(name: str) -> None:
        for i in range(2000):
            history.record("produce", op="invoke", id=history.new_id(), value=f"{name}{i}")

    threads = [threading.Thread(target=write, args=(n,)) for n in "abcd"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    history.close("passed")
    assert history.directory is not None
    lines = [json.loads(line) for line in (history.directory / "events.jsonl").read_text().splitlines()]
    assert lines == history.events
    assert len({e["id"] for e in lines}) == 8000
    times = [e["t"] for e in lines]
    assert times == sorted(times)


def test_max_acked_offset() -> None:
    events = [{"type": "produce", "op": "ok", "offset": 4, "partition": 0},
              {"type": "produce", "op": "ok", "offset": 9, "partition": None},
              {"type": "produce", "op": "ok", "offset": 99, "partition": 1},
              {"type": "produce", "op": "info", "offset": None}]
    assert max_acked_offset(events) == 9
    assert max_acked_offset([]) is None
