"""``elr search``: search random fault schedules against the model.

    elr search --profile legacy --examples 1000 --out found.elr.yaml
"""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

import yaml

from pytest_elr.actions import Action
from pytest_elr.backends.model import ModelBackend
from pytest_elr.core.commandline import command_parser
from pytest_elr.core.limits import MAX_PARTITIONS
from pytest_elr.core.specs import ClusterSpec, TopicSpec, rotated_assignment
from pytest_elr.model.profiles import PROFILE_NAMES
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.export import scenario_yaml
from pytest_elr.scenario.loader import parse_scenario
from pytest_elr.schedule.search import BROKERS, MIN_ISR, QUORUM, search


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("search", __doc__)
    parser.add_argument("--profile", choices=PROFILE_NAMES, default="legacy")
    parser.add_argument("--examples", type=int, default=3000)
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--controllers", type=int, choices=(1, QUORUM), default=1,
                        help=f"KRaft controllers; with {QUORUM}, controller faults are drawn too (default: 1)")
    parser.add_argument("--partitions", type=int, default=1,
                        help="partitions of the topic, leaders spread over the brokers; with more than one, "
                             "faults are aimed at any partition's leader too (default: 1)")
    parser.add_argument("--spare-broker", action="store_true",
                        help="a fourth broker, holding no replica: its metadata is held (hold_metadata) too")
    parser.add_argument("--out", type=Path, help="write the shrunk counterexample as a scenario")
    args = parser.parse_args(argv)
    if not 1 <= args.partitions <= MAX_PARTITIONS:
        parser.error(f"--partitions: 1 to {MAX_PARTITIONS}, not {args.partitions}")
    started = time.monotonic()
    found = search(args.profile, max_examples=args.examples, steps=args.steps, controllers=args.controllers,
                   partitions=args.partitions, spare=args.spare_broker)
    elapsed = time.monotonic() - started
    if found is None:
        print(f"profile {args.profile}: no invariant broken in {args.examples} schedules ({elapsed:.1f}s)")
        return 0
    actions, violations = found
    print(f"profile {args.profile}: counterexample of {len(actions)} actions ({elapsed:.1f}s)")
    for action in actions:
        print(f"  - {_flow(action.to_yaml(BROKERS))}")
    for v in violations:
        print(f"  {v}")
    if args.out:
        args.out.write_text(counterexample_yaml(args.profile, actions, violations, controllers=args.controllers,
                                                partitions=args.partitions, spare=args.spare_broker))
        print(f"written to {args.out}")
    return 1


def _flow(items: list[dict[str, object]]) -> str:
    return "; ".join(yaml.safe_dump(item, default_flow_style=True).strip()[1:-1] for item in items)


def counterexample_yaml(profile: str, actions: list[Action], violations: list[str], controllers: int = 1,
                        partitions: int = 1, spare: bool = False) -> str:
    """The counterexample as a scenario that passes under pytest: every profile declares the loss
    the model gives it on this schedule (found where it was found, none or found elsewhere), and a
    profile the model cannot pass whatever the verdict is left out of ``profiles:``, saying why."""
    cluster = ClusterSpec(brokers=(*BROKERS, max(BROKERS) + 1) if spare else BROKERS, controllers=controllers)
    topic = TopicSpec(name="found", replicas=BROKERS, min_insync_replicas=MIN_ISR,
                      more_partitions=rotated_assignment(BROKERS, partitions)[1:])
    name = f"found-{profile}-counterexample"
    # whole words: a description cut mid-word reads as a bug of its own
    description = textwrap.shorten(f"Shrunk by Hypothesis under profile {profile}: " + "; ".join(violations),
                                   width=600, placeholder=" ...")

    def text(verdicts: dict[str, str], profiles: list[str], left_out: str = "") -> str:
        return scenario_yaml(name, description + left_out, cluster, topic, actions, verdicts, profiles=profiles)

    verdicts: dict[str, str] = {}
    for p in PROFILE_NAMES:
        run = run_scenario(parse_scenario(text({}, [p])), ModelBackend(), p)
        verdicts[p] = "found" if run.verdict is not None and run.verdict.lost_count else "none"
    runnable, left_out = [], []
    for p in PROFILE_NAMES:
        run = run_scenario(parse_scenario(text(verdicts, [p])), ModelBackend(), p)
        if run.passed or p == profile:
            runnable.append(p)
        else:
            left_out.append(f"{p} ({run.message.splitlines()[0]})")
    why = f" Not run under {', '.join(left_out)}." if left_out else ""
    return text({p: verdicts[p] for p in runnable}, runnable, why)


if __name__ == "__main__":
    sys.exit(main())
