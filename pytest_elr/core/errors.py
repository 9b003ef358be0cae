"""Errors that cross layers: a wrong scenario, and a backend that cannot do its job."""

from __future__ import annotations

from pathlib import Path


class ScenarioError(Exception):
    """A scenario file is wrong. Carries the file and line so the message points at it."""

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None):
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.path or "<scenario>"
        if self.line is not None:
            where += f":{self.line}"
        return f"{where}: {self.message}"


class BackendError(Exception):
    """The backend could not do what it was asked (cluster not starting, engine missing...)."""


#: what a ``produce:`` expectation may name as its rejection: the broker's answer to a produce
#: request, or the client's own error when no answer came in time
PRODUCE_ERRORS: tuple[str, ...] = (
    "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "NOT_LEADER_OR_FOLLOWER",
    "NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE", "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH",
    "MSG_TIMED_OUT", "REQUEST_TIMED_OUT",
)
#: what a ``rejected:`` expectation may name: the controller's answer to a leader's AlterPartition
ALTER_PARTITION_ERRORS: tuple[str, ...] = ("INELIGIBLE_REPLICA", "INVALID_UPDATE_VERSION", "FENCED_LEADER_EPOCH")
#: what a ``refused:`` expectation may name: the controller's answer refusing an operator request
#: (AlterPartitionReassignments: ``reassign``, ``cancel_reassignment``; a forged ``alter_partition``)
OPERATOR_ERRORS: tuple[str, ...] = (
    "UNKNOWN_SERVER_ERROR", "NO_REASSIGNMENT_IN_PROGRESS", "INVALID_REPLICA_ASSIGNMENT", "INVALID_REQUEST",
    "UNKNOWN_TOPIC_OR_PARTITION", "BROKER_ID_NOT_REGISTERED",
    # a forged AlterPartition's (``alter_partition``): KIP-903's, the epochs', KIP-704's answers
    "STALE_BROKER_EPOCH", "NOT_CONTROLLER", "FENCED_LEADER_EPOCH", "INVALID_UPDATE_VERSION", "INELIGIBLE_REPLICA",
    "NEW_LEADER_ELECTED",
)
