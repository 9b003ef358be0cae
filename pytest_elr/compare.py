"""``python -m pytest_elr.compare``: the same scenarios on the model and on real Kafka, and every
step where they disagree.

    python -m pytest_elr.compare [scenarios/...] [--profiles kafka,legacy]

For each scenario and profile both backends run; after every fault the kafka backend is given
time to reach the state the model predicts, and each time it does not, the history records a
``disagreement`` (leader, ISR, ELR or fenced brokers differ). Those, plus step failures, are
printed per scenario. docs/model.md says which known disagreements are model simplifications,
documented profile differences, or findings about Kafka.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pytest_elr.backends.kafka import KafkaBackend, close_pool
from pytest_elr.backends.model import ModelBackend
from pytest_elr.model.mutants import load_suite
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.loader import load_scenario


def disagreements(history_dir: Path | None) -> list[dict[str, object]]:
    if history_dir is None:
        return []
    out = []
    for line in (history_dir / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["type"] == "disagreement":
            out.append(event)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_elr.compare", description=__doc__)
    parser.add_argument("paths", nargs="*", type=Path, default=[Path("scenarios")])
    parser.add_argument("--profiles", default="kafka,legacy")
    parser.add_argument("--history-dir", type=Path, default=Path(".elr-history/compare"))
    args = parser.parse_args(argv)
    suite = [s for p in args.paths for s in (load_suite(p) if p.is_dir() else [load_scenario(p)])]
    differing = 0
    try:
        for scenario in suite:
            for profile in args.profiles.split(","):
                if profile not in scenario.profiles:
                    continue
                model = run_scenario(scenario, ModelBackend(), profile)
                real = run_scenario(scenario, KafkaBackend(), profile, args.history_dir)
                found = disagreements(real.history_dir)
                same = model.passed == real.passed and not found
                differing += not same
                print(f"{scenario.name} [{profile}]: model {'pass' if model.passed else 'FAIL'}, "
                      f"kafka {'pass' if real.passed else 'FAIL'}, {len(found)} disagreements", flush=True)
                for d in found:
                    print(f"  step {d['step']} after {d['after']}: {'; '.join(d['differences'])}")  # type: ignore[arg-type]
                if not real.passed:
                    print("  " + real.message.replace("\n", "\n  "))
    finally:
        close_pool()
    print(f"{differing} scenario runs where Kafka and the model differ")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
