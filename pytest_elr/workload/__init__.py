"""The workload: a background producer at a steady rate, and the final drain (issue #5 item 1)."""

from pytest_elr.workload.drain import DrainedRecord, DrainResult, drain, drain_partitions, max_acked_offset
from pytest_elr.workload.producer import (
    DEFINITE_ERRORS,
    BackgroundProducer,
    ProducerStats,
    is_definite,
)

__all__ = [
    "DEFINITE_ERRORS",
    "BackgroundProducer",
    "DrainResult",
    "DrainedRecord",
    "ProducerStats",
    "drain",
    "drain_partitions",
    "is_definite",
    "max_acked_offset",
]
