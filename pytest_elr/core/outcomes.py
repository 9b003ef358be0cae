"""What a client can tell of one record it sent: the produce vocabulary every backend shares.

Each backend answers a send in its own words (Kafka's error codes, librdkafka's local errors, the
model's rule names); a step compares what the system answered with what the model predicts, so both
are put in these words first. They say what a *client* sees when its send returns, not what the log
holds: a record the leader appended whose acknowledgement never came is ``unavailable`` (timed out)
to the client, whatever happens to it later.
"""

from __future__ import annotations

from typing import Literal

Outcome = Literal["acknowledged", "sent", "not_enough_replicas", "unavailable", "indeterminate"]

#: the leader answered success (acks=1: appended; acks=all: committed under the HWM)
ACKNOWLEDGED: Outcome = "acknowledged"
#: acks=0: handed to the network; no answer ever comes
SENT: Outcome = "sent"
#: refused before the append: the ISR is under the (effective) min ISR
NOT_ENOUGH_REPLICAS: Outcome = "not_enough_replicas"
#: no leader took it, or no answer came in time (the client's request timed out)
UNAVAILABLE: Outcome = "unavailable"
#: any other answer: the record may or may not be in the log
INDETERMINATE: Outcome = "indeterminate"

OUTCOMES: tuple[Outcome, ...] = (ACKNOWLEDGED, SENT, NOT_ENOUGH_REPLICAS, UNAVAILABLE, INDETERMINATE)

_UNAVAILABLE = frozenset({
    "NOT_LEADER_OR_FOLLOWER", "NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE", "FENCED_LEADER_EPOCH",
    "UNKNOWN_LEADER_EPOCH", "UNKNOWN_TOPIC_OR_PART", "UNKNOWN_TOPIC_OR_PARTITION", "MSG_TIMED_OUT",
    "REQUEST_TIMED_OUT",
})
#: the same error under two names (Kafka's protocol name and librdkafka's)
ALIASES = {"NOT_LEADER_FOR_PARTITION": "NOT_LEADER_OR_FOLLOWER",
           "UNKNOWN_TOPIC_OR_PART": "UNKNOWN_TOPIC_OR_PARTITION"}


def error_name(error: str) -> str:
    """An error's protocol name, whichever client spelled it (leading ``_`` of local errors dropped)."""
    name = error.lstrip("_")
    return ALIASES.get(name, name)


def classify(error: str | None, acks: str) -> Outcome:
    """The word for one send's answer: ``error`` None means success."""
    if error is None:
        return SENT if acks == "0" else ACKNOWLEDGED
    name = error_name(error)
    if name == "NOT_ENOUGH_REPLICAS":
        return NOT_ENOUGH_REPLICAS
    if name in _UNAVAILABLE:
        return UNAVAILABLE
    return INDETERMINATE
