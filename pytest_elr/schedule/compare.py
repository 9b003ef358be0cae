"""``elr compare``: the same scenarios -- and a bounded number of Hypothesis-generated fault
schedules -- on real Kafka, held to the model, and every place where they differ.

    elr compare [scenarios/...] [--profiles kafka,legacy] [--schedules 3 --steps 8]

A thin wrapper of the executor's own check: every run holds Kafka to the model after every fault
(each field the backend observes) and every produce (each record's outcome); a difference that
persists past the settle timeout fails the step unless the step or the profile declares it. This
prints, per run, its result, each disagreement and each declared difference (with its reason).
Generated schedules come from the property search's state machine (derandomized: the same
arguments give the same schedules); each is written as a runnable ``*.elr.yaml`` under the history
directory, its verdict taken from the model. docs/model.md says which differences are model
simplifications, documented profile differences, or findings about Kafka.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pytest_elr.actions import Action
from pytest_elr.backends.kafka import KafkaBackend
from pytest_elr.backends.model import ModelBackend
from pytest_elr.core.commandline import command_parser
from pytest_elr.core.specs import ClusterSpec, TopicSpec
from pytest_elr.model.profiles import get_profile
from pytest_elr.scenario.executor import RunResult, run_scenario, say_difference
from pytest_elr.scenario.export import scenario_yaml
from pytest_elr.scenario.loader import load_scenario
from pytest_elr.scenario.schema import Scenario
from pytest_elr.scenario.suite import SHIPPED, NoScenariosError, load_suite
from pytest_elr.schedule.search import BROKERS, MIN_ISR, SearchConfig, machine_for, run_machine


def generated_schedules(count: int, steps: int, profile: str) -> list[list[Action]]:
    """``count`` fault schedules the property search would explore, first ones first."""
    found: list[list[Action]] = []

    class Collect(machine_for(SearchConfig(profile=get_profile(profile)))):  # type: ignore[misc,valid-type]
        def protocol_invariants(self) -> None:
            """Not an invariant here (the override drops Hypothesis' mark): a schedule that breaks
            one -- the ``kafka`` profile's known losses of acknowledged records, docs/model.md
            "Findings about Kafka" -- is still one to hold Kafka to the model on, its verdict the
            model's; raising would end the generation at the first such schedule."""

        def teardown(self) -> None:
            actions = list(self.actions)
            kinds = {a.kind for a in actions}
            # Hypothesis tries the simplest schedules first: keep those with records at stake and
            # at least two kinds of fault.
            interesting = "produce" in kinds and len(kinds - {"produce", "heal", "flush"}) >= 2
            # Hypothesis may replay an example; a schedule run twice tells nothing new.
            if interesting and actions not in found and len(found) < count:
                found.append(actions)

    run_machine(Collect, count * 50, steps)
    return found


def schedule_scenarios(count: int, steps: int, profile: str, out_dir: Path) -> list[Scenario]:
    """Each schedule as a scenario file whose verdict is the model's (loss found or none).

    Schedules the model cannot pass whatever the verdict -- a lossy shutdown of a broker with
    nothing unsynced proves nothing, "the fault did not bite" -- are left out.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    cluster = ClusterSpec(brokers=BROKERS)
    topic = TopicSpec(name="generated", replicas=BROKERS, min_insync_replicas=MIN_ISR)
    scenarios: list[Scenario] = []
    for actions in generated_schedules(count * 4, steps, profile):
        if len(scenarios) == count:
            break
        name = f"generated-{profile}-{len(scenarios) + 1}"
        path = out_dir / f"{name}.elr.yaml"
        path.write_text(scenario_yaml(name, "a schedule from the property search", cluster, topic, actions, {}))
        lost = run_scenario(load_scenario(path), ModelBackend(), profile).verdict
        verdict = "found" if lost is not None and lost.lost_count else "none"
        path.write_text(scenario_yaml(name, "a schedule from the property search", cluster, topic, actions,
                                      {profile: verdict}))
        scenario = load_scenario(path)
        if run_scenario(scenario, ModelBackend(), profile).passed:
            scenarios.append(scenario)
        else:
            path.unlink()
    return scenarios


def report(scenario: Scenario, profile: str, result: RunResult) -> list[str]:
    """The lines ``elr compare`` prints for one run."""
    lines = [f"{scenario.name} [{profile}]: kafka {'pass' if result.passed else 'FAIL'}, "
             f"{len(result.disagreements)} disagreements, {len(result.declared)} declared differences"]
    lines += [f"  {say_difference(d)}" for d in (*result.disagreements, *result.declared)]
    if not result.passed:
        lines.append("  " + result.message.replace("\n", "\n  "))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("compare", __doc__)
    parser.add_argument("paths", nargs="*", type=Path, default=[SHIPPED],
                        help="scenario files or directories (default: the KIP suite this package ships)")
    parser.add_argument("--profiles", default="kafka,legacy")
    parser.add_argument("--schedules", type=int, default=3, help="generated schedules per profile (0: none)")
    parser.add_argument("--steps", type=int, default=8, help="actions per generated schedule (at most)")
    parser.add_argument("--history-dir", type=Path, default=Path(".elr-history/compare"))
    args = parser.parse_args(argv)
    profiles = args.profiles.split(",")
    try:
        suite = [s for path in args.paths for s in load_suite(path)]
    except NoScenariosError as exc:
        print(f"elr compare: {exc}", file=sys.stderr)
        return 2
    runs = [(s, p) for s in suite
            for p in profiles if p in s.profiles and (s.backends is None or "kafka" in s.backends)]
    for profile in profiles if args.schedules else []:
        generated = schedule_scenarios(args.schedules, args.steps, profile, args.history_dir / "generated")
        runs += [(s, profile) for s in generated]
    differing = 0
    pool = KafkaBackend.new_session()
    try:
        for scenario, profile in runs:
            result = run_scenario(scenario, KafkaBackend(session=pool), profile, args.history_dir)
            differing += not result.passed or bool(result.disagreements)
            print("\n".join(report(scenario, profile, result)), flush=True)
    finally:
        pool.close()
    print(f"{differing} of {len(runs)} runs where Kafka and the model differ (or the run failed)")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
