"""``elr search``: search random fault schedules against the model.

    elr search --profile legacy --examples 1000 --out found.elr.yaml
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import yaml

from pytest_elr.core.commandline import command_parser
from pytest_elr.core.specs import ClusterSpec, TopicSpec
from pytest_elr.model.profiles import PROFILE_NAMES
from pytest_elr.scenario.export import scenario_yaml
from pytest_elr.schedule.search import BROKERS, MIN_ISR, search


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("search", __doc__)
    parser.add_argument("--profile", choices=PROFILE_NAMES, default="legacy")
    parser.add_argument("--examples", type=int, default=3000)
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--out", type=Path, help="write the shrunk counterexample as a scenario")
    args = parser.parse_args(argv)
    started = time.monotonic()
    found = search(args.profile, max_examples=args.examples, steps=args.steps)
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
        args.out.write_text(counterexample_yaml(args.profile, actions, violations))
        print(f"written to {args.out}")
    return 1


def _flow(items: list[dict[str, object]]) -> str:
    return "; ".join(yaml.safe_dump(item, default_flow_style=True).strip()[1:-1] for item in items)


def counterexample_yaml(profile: str, actions: list, violations: list[str]) -> str:  # type: ignore[type-arg]
    return scenario_yaml(
        name=f"found-{profile}-counterexample",
        description=f"Shrunk by Hypothesis under profile {profile}: " + "; ".join(violations)[:500],
        cluster=ClusterSpec(brokers=BROKERS),
        topic=TopicSpec(name="found", replicas=BROKERS, min_insync_replicas=MIN_ISR),
        actions=actions,
        verdict_by_profile={profile: "found"},
    )


if __name__ == "__main__":
    sys.exit(main())
