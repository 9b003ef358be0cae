"""The background producer's pacing (``SendSchedule``) on a fake clock: no broker, no wall time."""

from __future__ import annotations

import pytest

from pytest_elr.workload.producer import SendSchedule


def _run(schedule: SendSchedule, until: float, step: float, stalls: dict[float, float] | None = None) -> list[float]:
    """A loop like the producer's: advance the fake clock, send whenever due; ``stalls`` freeze
    the loop at a time for a while (a starved thread). Returns the send times."""
    now, sends, stalls = schedule.base, [], dict(stalls or {})
    while now < until:
        for at in [a for a in stalls if a <= now]:
            now += stalls.pop(at)
        wait = schedule.wait_s(now)
        if wait > 0:
            now += min(wait, step)
            continue
        schedule.take(now)
        sends.append(now)
    return sends


def test_sends_rate_times_duration_and_never_before_due() -> None:
    schedule = SendSchedule(rate=200.0, max_lag_s=1.0, base=100.0)
    sends = _run(schedule, until=105.0, step=0.05)
    assert len(sends) == 1000
    assert all(t >= 100.0 + n / 200.0 - 1e-9 for n, t in enumerate(sends))


def test_a_short_stall_is_caught_up_and_nothing_skipped() -> None:
    schedule = SendSchedule(rate=100.0, max_lag_s=1.0, base=0.0)
    sends = _run(schedule, until=5.0, step=0.01, stalls={2.0: 0.5})
    assert len(sends) == 500  # every slot sent: the 50 missed ones at once after the stall
    assert sum(1 for t in sends if abs(t - 2.5) < 1e-9) >= 50


def test_a_long_stall_skips_the_missed_slots_instead_of_a_burst() -> None:
    schedule = SendSchedule(rate=4.0, max_lag_s=1.0, base=0.0)  # slots 0.25 s apart: exact in binary
    for n in range(8):  # on schedule for 2 s
        assert schedule.wait_s(n * 0.25) == 0 and schedule.take(n * 0.25) == 0
    skipped = schedule.take(5.0)  # then starved for 3 s: the send at 5.0 uses slot 20
    assert skipped == 12  # the 12 slots of 2.0-4.75, never sent later in a burst
    assert schedule.wait_s(5.0) == 0.25  # the next send is on the schedule again


def test_a_stall_within_the_lag_bound_is_not_skipped() -> None:
    schedule = SendSchedule(rate=4.0, max_lag_s=1.0, base=0.0)
    assert schedule.take(1.0) == 0  # 1.0 s late, at the bound: caught up, not skipped
    assert schedule.wait_s(1.0) == -0.75


def test_the_schedule_does_not_drift_with_loop_overhead() -> None:
    # Each send costs 3 ms of a 5 ms slot: the n-th send still goes out at base + n * interval.
    schedule = SendSchedule(rate=200.0, max_lag_s=1.0, base=0.0)
    now, times = 0.0, []
    for _ in range(1000):
        now = max(now, schedule.wait_s(0.0))  # wait_s(0) is the due time itself
        schedule.take(now)
        times.append(now)
        now += 0.003
    assert times[-1] == pytest.approx(999 / 200.0, abs=1e-9)
