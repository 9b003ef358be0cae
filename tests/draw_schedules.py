"""Prints (as a JSON list) the first schedules the property search and ``elr explore`` draw, as scenario YAML, for
``tests/test_draws.py`` to compare across fresh processes.

    python3 tests/draw_schedules.py [--unpinned] [module ...]

imports each module first; ``--unpinned`` runs without ``seed_only_draws`` (the planted fault).
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import json
import sys

from pytest_elr.core.specs import ClusterSpec, TopicSpec
from pytest_elr.model.profiles import get_profile
from pytest_elr.scenario.export import scenario_yaml
from pytest_elr.schedule import search
from pytest_elr.schedule.explore import schedules

SCHEDULES = 40
#: explore's seed 0 on three partitions and with a spare broker (the rules those alone draw)
MORE = 15


def as_yaml(name: str, actions: list) -> str:  # type: ignore[type-arg]
    return scenario_yaml(name, "drawn", ClusterSpec(brokers=search.BROKERS),
                         TopicSpec(name="t", replicas=search.BROKERS, min_insync_replicas=search.MIN_ISR),
                         actions, {})


def drawn() -> list[str]:
    """The first ``SCHEDULES`` schedules of the search (derandomized) and of explore's seed 0, then
    the first ``MORE`` of explore's seed 0 on three partitions and with a spare broker."""
    found: list[list] = []  # type: ignore[type-arg]

    class Collect(search.machine_for(search.SearchConfig(profile=get_profile("kafka")))):  # type: ignore[misc]
        def teardown(self) -> None:
            found.append(list(self.actions))

    search.run_machine(Collect, SCHEDULES, 25)
    out = [as_yaml(f"search-{i}", actions) for i, actions in enumerate(found[:SCHEDULES])]
    explored = itertools.islice(schedules(get_profile("kafka"), 0, 8, None), SCHEDULES)
    out += [as_yaml(f"explore-{i}", actions) for i, actions in enumerate(explored)]
    for name, kw in (("partitions", {"partitions": 3}), ("spare", {"spare": True})):
        more = itertools.islice(schedules(get_profile("kafka"), 0, 8, None, **kw), MORE)  # type: ignore[arg-type]
        out += [as_yaml(f"explore-{name}-{i}", actions) for i, actions in enumerate(more)]
    return out


def main(argv: list[str]) -> None:
    if argv[:1] == ["--unpinned"]:
        search.seed_only_draws = contextlib.nullcontext  # type: ignore[assignment]
        argv = argv[1:]
    for module in argv:
        importlib.import_module(module)
    print(json.dumps(drawn()))


if __name__ == "__main__":
    main(sys.argv[1:])
