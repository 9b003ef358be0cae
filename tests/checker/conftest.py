"""One Spark session for all checker tests (starting one costs 5-15 s)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

# No skips: without pyspark or Java these fail with the import or start-up error, which says
# what is missing (./elr test installs both).
from pytest_elr.checker.session import SparkSettings, get_spark, stop_spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    # Two shuffle partitions: the test histories have a few lines each.
    settings = SparkSettings(
        master="local[2]",
        shuffle_partitions=2,
        driver_memory="1g",
        java_options="-XX:TieredStopAtLevel=1",
    )
    session = get_spark(settings)
    yield session
    stop_spark()
