"""One Spark session for all analysis tests (starting one costs 5-15 s)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("pyspark", reason="the history checker needs pyspark (pip install pyspark)")
if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
    pytest.skip("the history checker needs Java 17 for Spark", allow_module_level=True)

from pytest_elr.analysis.session import SparkSettings, get_spark, stop_spark  # noqa: E402

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
