"""Waiting for a real cluster: every wait of the SUT is one poll on tenacity.

Kafka gets where a test waits for in its own time (a session timeout, a replica lag time), so a
wait is an attempt every ``interval_s`` until the answer is the one wanted or ``timeout_s`` has
passed. An error of ``retry_on`` (a broker that does not answer yet) counts as "not yet"; any
other error ends the wait at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn, TypeVar

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    retry_if_not_result,
    stop_after_delay,
    wait_fixed,
)

from pytest_elr.sut.errors import KafkaProtocolError

T = TypeVar("T")


def poll(attempt: Callable[[], T], *, timeout_s: float, interval_s: float,
         timed_out: Callable[[object], BaseException], until: Callable[[T], bool] = lambda _: True,
         retry_on: type[Exception] = KafkaProtocolError) -> T:
    """``attempt()`` until ``until`` accepts what it returns; that value.

    After ``timeout_s`` raises ``timed_out(last)``, ``last`` being the last attempt's value or the
    error it raised.
    """
    def give_up(state: RetryCallState) -> NoReturn:
        outcome = state.outcome
        assert outcome is not None  # tenacity gives up only after an attempt
        raise timed_out(outcome.exception() if outcome.failed else outcome.result())

    retrying = Retrying(stop=stop_after_delay(timeout_s), wait=wait_fixed(interval_s),
                        retry=retry_if_exception_type(retry_on) | retry_if_not_result(until),
                        retry_error_callback=give_up)
    return retrying(attempt)


def await_value(read: Callable[[], T], predicate: Callable[[T], bool], timeout_s: float = 30.0,
                interval_s: float = 0.2, what: str = "value") -> T:
    """``read()`` until ``predicate`` holds for its value; on timeout a ``TimeoutError`` with the last one."""
    def timed_out(last: object) -> TimeoutError:
        seen = f"error: {last}" if isinstance(last, KafkaProtocolError) else last
        return TimeoutError(f"{what}: condition not met within {timeout_s}s; last: {seen}")

    return poll(read, until=predicate, timeout_s=timeout_s, interval_s=interval_s, timed_out=timed_out)
