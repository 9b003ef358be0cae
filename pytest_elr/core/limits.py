"""Every limit of the language, in one place (docs/language.md, "Limits", lists the same).

Each number a scenario, an option or the Python API gives is checked against one of these when
it is read, so nothing a scenario says can exhaust memory or time, overflow, or hang a run.
"""

from __future__ import annotations

MAX_FILE_BYTES = 1 << 20  # a scenario file
MAX_VALUES = 20_000  # YAML values in one document (more means alias expansion: a "YAML bomb")
MAX_DEPTH = 32  # nesting of mappings and lists
MAX_NAME_CHARS = 100  # scenario name, step label
MAX_TEXT_CHARS = 10_000  # description, note
MAX_STEPS = 200
MAX_ACTIONS_PER_STEP = 50
MAX_BROKERS = 9  # brokers in a cluster
MAX_PARTITIONS = 1000  # partitions of the topic
MAX_BROKER_ID = 99
MIN_SESSION_TIMEOUT_MS, MAX_SESSION_TIMEOUT_MS = 1_000, 120_000
MAX_LOG_DIRS = 4  # log directories per broker (JBOD)
MAX_MIN_ISR = 99
MAX_PRODUCE = 10_000  # records in one produce action
MAX_RECORDS = 100_000  # records one scenario may send in all (produce actions and the workload)
MAX_RATE_PER_S = 10_000.0  # background workload
MAX_PER_STEP = 1_000  # background records per step on an in-process backend
MAX_LATENCY_MS = 120_000  # slow links
MAX_WAIT_S = 600.0  # one wait action
MAX_STEP_TIMEOUT_S = 3_600.0  # how long a step's expectations may take to hold
MAX_OFFSET = 1_000_000  # an expected HWM
MAX_ELECTIONS = 10_000  # an expected count of elections since a scenario's start
MAX_KNOWN_FAILURES = 20  # known_failures entries of one scenario (the version ranges are read by packaging)
