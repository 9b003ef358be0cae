"""``elr kafka-mutants``: Kafka's own code, with one bug planted at a time, grades the suite.

    elr kafka-mutants list   --coverage DIR [--all]
    elr kafka-mutants run    --coverage DIR --out CAMPAIGN [--budget 2h] [--shard 3/8] [--mutant ID]...
    elr kafka-mutants report CAMPAIGN... [--html FILE]

A mutant is one small change to one instruction of one method of the ELR code (the classes and
methods of :data:`pytest_elr.schedule.kafka_coverage.TARGETS`), planted by pytest-elr's Java agent as
the class loads (:mod:`pytest_elr.sut.instrument`): on the controllers for a controller class, on
the brokers for ``kafka.cluster.Partition``. Its id is stable for a release's class files:
``CLASS#METHOD(ARGS)RETURN:LINE:OPERATOR:INDEX``.

``list`` enumerates the mutants on lines the suite covers (``elr kafka-coverage``'s ``lines.json``).
``run`` plants each in a fresh cluster, runs only the scenario runs that cover its line, fastest
first, and stops at the first that does not end as it ends on the unmutated release (a pass, or
exactly its declared known failure). Each mutant ends as:

- **killed**: by which run, and at which step and field, invariant or verdict (or the harness's
  error, when the run could not finish), and that run's scenario passed its **control** (below);
- **survived**: every covering run ended as on the real release;
- **control failed**: a run told, but its scenario, run unmutated on the same release and profile,
  failed too (at the same step or elsewhere): no kill (counted apart, like no-start);
- **no-start**: the cluster did not start (counted apart: the suite never ran), and the same
  scenario unmutated, started right after, did (else ``control failed``: the machine could not start
  a cluster then, not the mutant);
- **timed out**: it did not end within ``--mutant-timeout``; ``--retry 'timed out'`` goes on after the
  covering runs it got through (each ended as on the real release, the mutant planted), or from the
  first with ``--from-start``;
- **not planted**: its class never loaded, or the agent did not find the site (a harness problem),
  by every read of the agent's report: each run's at its end, and a last one after the mutant's runs.

A control runs once per scenario, profile and release in a campaign shard, the first time that
scenario kills (:class:`Controls`, kept in ``CAMPAIGN/controls-<shard>.jsonl``); later kills by the
same scenario reuse it. Each mutant (and each control) runs in a child process (its own cluster
pool, a hard time limit); results are appended to ``CAMPAIGN/results-<shard>.jsonl`` as they come, so
a stopped campaign resumes where it was, and shards (``--shard K/N``, by a hash of the id) split one
campaign across machines. ``report`` merges every results file it is given into one table and an
HTML page.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import html
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pytest_elr.core.commandline import command_parser
from pytest_elr.core.concurrency import parallel_count, sigterm_interrupts
from pytest_elr.schedule.kafka_coverage import TARGETS, kafka_jars, target_method
from pytest_elr.sut.capacity import cluster_slots

#: A log line changes no state a client or the cluster can see: removing its call is equivalent by
#: construction (PIT leaves logging calls out by default for the same reason).
LOGGING_CALL = re.compile(r"^call of \w+\.(trace|debug|info|warn|error|maybeLogPartitionChange) removed$")
STATUSES = ("killed", "survived", "control failed", "no-start", "timed out", "not planted", "equivalent")
#: in a campaign directory: mutants argued equivalent (the change cannot be observed), one a line,
#: ``ID<TAB>the reason``; ``#`` starts a comment. A survivor or a timed-out row of such a mutant is
#: ``equivalent``; a kill refutes the argument and stays a kill (the report says so); a campaign
#: does not run them (unless ``--retry equivalent``).
ARGUMENTS_FILE = "equivalent.tsv"
#: the statuses an argument of equivalence explains: every covering run ended as on the release
EXPLAINED_BY_EQUIVALENCE = ("survived", "timed out")
DEFAULT_MUTANT_TIMEOUT_S = 900.0
#: a cluster that cannot start under a mutant is told apart quickly (a healthy one is ready in ~15 s)
MUTANT_START_TIMEOUT_S = 60


#: a mutant's id: CLASS#METHOD(ARGS)RETURN:LINE:OPERATOR:INDEX
MUTANT_ID = re.compile(r"([^#]+)#([^(]+)(\(.*):(-?\d+):([A-Z_]+):(\d+)")


@dataclass(frozen=True)
class Mutant:
    id: str
    class_name: str
    method: str
    desc: str
    line: int
    operator: str
    index: int
    description: str

    @classmethod
    def parse(cls, row: str) -> Mutant:
        """A line of the agent's ``list``: id, line, operator, description (tab-separated)."""
        mutant_id, line, operator, description = row.rstrip("\n").split("\t")
        m = MUTANT_ID.fullmatch(mutant_id)
        if m is None:
            raise ValueError(f"not a mutant id: {mutant_id!r}")
        return cls(mutant_id, m[1], m[2], m[3], int(line), operator, int(m[6]), description)

    @property
    def short_method(self) -> str:
        return f"{self.class_name.rsplit('.', 1)[-1]}.{self.method}"

    @property
    def equivalent(self) -> str | None:
        """Why the mutant cannot be observed, when that holds by construction (else None)."""
        if self.operator == "VOID_METHOD_CALLS" and LOGGING_CALL.match(self.description):
            return "a logging call: no state changes"
        return None

    def in_words(self) -> str:
        return f"`{self.short_method}` line {self.line}: {self.description}"


def enumerate_mutants(kafka_version: str) -> list[Mutant]:
    """Every mutant of the target methods, as the agent walks the release's class files."""
    from pytest_elr.sut.instrument import build_agents

    agents = build_agents()
    cmd = ["java", "-cp", agents.classpath(), "ElrMutants", "list", *map(str, kafka_jars(kafka_version))]
    for name in TARGETS:
        cmd += ["--class", name]
    env = {k: v for k, v in os.environ.items() if k != "JAVA_TOOL_OPTIONS"}
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    mutants = [Mutant.parse(row) for row in p.stdout.splitlines() if row.strip()]
    return [m for m in mutants if target_method(m.class_name, m.method, m.desc)]


def resolve_scenario_file(recorded: str, root: Path | None = None) -> str:
    """A scenario file that ``lines.json`` names, found in this checkout: the coverage taken in one
    worktree (absolute paths) is reused from another, or from ``docs/campaigns/`` (paths relative to
    the repository). The path from its last ``scenarios`` directory on is looked up under ``root``
    (the current directory); a file found nowhere keeps its recorded name (``run`` refuses it)."""
    path, base = Path(recorded), root or Path.cwd()
    if (base / path).is_file():  # absolute and there, or relative to the current directory
        return str(base / path)
    parts = path.parts
    if "scenarios" in parts:
        tail = parts[len(parts) - 1 - parts[::-1].index("scenarios"):]
        found = base.joinpath(*tail)
        if found.is_file():
            return str(found)
    return recorded


class CoverageIndex:
    """``lines.json`` of ``elr kafka-coverage``: which runs cover which lines."""

    def __init__(self, path: Path) -> None:
        data = json.loads(path.read_text())
        self.path = path
        self.kafka_version: str = data["kafka_version"]
        self.source_of: dict[str, str] = data["source_of"]
        self.runs: dict[str, dict[str, Any]] = data["runs"]
        for run in self.runs.values():
            run["scenario_file"] = resolve_scenario_file(run["scenario_file"])
        self._covered = {rid: {src: set(lines) for src, lines in r["covered"].items()} for rid, r in self.runs.items()}

    def covering_runs(self, mutant: Mutant) -> list[dict[str, Any]]:
        """The runs (scenario file, profile) that ran the mutant's line, fastest first, one per
        scenario and profile."""
        source = self.source_of.get(mutant.class_name) or self.source_of.get(mutant.class_name.split("$")[0], "")
        found: dict[tuple[str, str], dict[str, Any]] = {}
        for rid, run in self.runs.items():
            if mutant.line in self._covered[rid].get(source, set()):
                key = (run["scenario_file"], run["profile"])
                if key not in found or run["seconds"] < found[key]["seconds"]:
                    found[key] = run
        return sorted(found.values(), key=lambda r: (r["seconds"], r["scenario_file"], r["profile"]))


def in_shard(mutant_id: str, shard: tuple[int, int]) -> bool:
    k, n = shard
    return int(hashlib.sha256(mutant_id.encode()).hexdigest(), 16) % n == k - 1


def parse_shard(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)/(\d+)", text)
    if m is None or not 1 <= int(m[1]) <= int(m[2]):
        raise argparse.ArgumentTypeError(f"--shard wants K/N with 1 <= K <= N, not {text!r}")
    return int(m[1]), int(m[2])


def parse_duration(text: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([smh]?)", text.strip())
    if m is None:
        raise argparse.ArgumentTypeError(f"a duration is like 90s, 30m or 2h, not {text!r}")
    return float(m[1]) * {"": 1, "s": 1, "m": 60, "h": 3600}[m[2]]


# ---------------------------------------------------------------------------------- one mutant


def run_outcome(scenario: Any, version: str | None, result: Any) -> tuple[str, dict[str, Any]]:
    """``pass`` when the run ended as on the unmutated release (a pass, or exactly the declared
    known failure), else ``killed`` / ``no-start`` and what showed it."""
    from pytest_elr.backends.kafka import CLUSTER_DID_NOT_START
    from pytest_elr.scenario.schema import unexplained

    if not result.passed and CLUSTER_DID_NOT_START in result.message:
        return "no-start", {"message": result.message.splitlines()[0][:400]}
    known = scenario.known_failures_on(version)
    if result.passed:
        if known:
            return "killed", {"failures": [], "message": "passed where the release is known to fail"}
        return "pass", {}
    other = unexplained(known, tuple(result.failures)) if known else list(result.failures)
    if known and other == []:
        return "pass", {}
    failures = [str(f) for f in other or []]
    kind = "check" if failures else "error"
    at = next((f.step for f in other or []), None)
    return "killed", {"kind": kind, "at": at, "failures": failures, "message": result.message.strip()[:1500]}


def run_one(mutant_id: str, runs: Sequence[dict[str, Any]], version: str, history_root: Path) -> dict[str, Any]:
    """In this process: the mutant planted, each covering run in turn until one tells."""
    from pytest_elr.backends.kafka import START_TIMEOUT_ENV, KafkaBackend
    from pytest_elr.scenario.executor import run_scenario
    from pytest_elr.scenario.loader import load_scenario
    from pytest_elr.sut.instrument import COVERAGE_ENV, MUTANT_ENV

    os.environ[MUTANT_ENV] = mutant_id
    os.environ.pop(COVERAGE_ENV, None)
    os.environ.setdefault(START_TIMEOUT_ENV, str(MUTANT_START_TIMEOUT_S))
    pool = KafkaBackend.new_session()
    out: dict[str, Any] = {"status": "survived", "runs_tried": 0}
    planted: dict[str, str] = {}
    try:
        for run in runs:
            scenario = load_scenario(run["scenario_file"])
            backend = KafkaBackend(session=pool, version=version)
            try:
                result = run_scenario(scenario, backend, run["profile"], history_root, stop_at_first_failure=True)
            except Exception as exc:  # the run broke under the mutant: it could not finish (the backend closed)
                out["runs_tried"] += 1
                planted.update({k: v for k, v in backend.planted_mutants.items() if v})
                out.update(status="killed", by={"scenario": scenario.name, "scenario_file": run["scenario_file"],
                                                "profile": run["profile"], "kind": "error", "failures": [],
                                                "message": f"{type(exc).__name__}: {exc}"[:1500]})
                break
            out["runs_tried"] += 1
            planted.update({k: v for k, v in backend.planted_mutants.items() if v})
            outcome, detail = run_outcome(scenario, version, result)
            if outcome != "pass":
                out.update(status=outcome, by={"scenario": scenario.name, "scenario_file": run["scenario_file"],
                                               "profile": run["profile"], **detail})
                break
            # what a mutant cut off by its time limit had shown so far (``_child``)
            print(json.dumps({"progress": out["runs_tried"], "of": len(runs)}), flush=True)
    finally:
        # The mutant's last word on planting: read again after its runs, from the clusters still
        # here (healed by their last run), before they go.
        final = final_plant_read(pool)
        pool.close()
    out["planted"] = {**planted, **final}
    out["planted_final"] = final
    out["status"] = plant_status(mutant_id, out["status"], planted, final)
    return out


def final_plant_read(pool: Any) -> dict[str, str]:
    """What the agent reported, per node of every cluster the pool still holds (nodes without a
    report left out); a cluster that cannot answer is skipped (its runs' reads stand)."""
    found: dict[str, str] = {}
    for cluster in pool.clusters():
        try:
            found.update({k: v for k, v in cluster.planted_mutants().items() if v})
        except Exception:  # a cluster broken by the mutant: nothing more to read from it
            continue
    return found


def plant_status(mutant_id: str, status: str, during_runs: dict[str, str], final: dict[str, str]) -> str:
    """``status``, or ``not planted`` when no read names the mutant: neither the read at each run's
    end nor the final one after the mutant's runs (``final_plant_read``). A run's own read can miss
    a report the final read finds (seen: a JVM's report not read at the run's end, under load)."""
    if status == "no-start":
        return status
    if any(v == mutant_id for v in (*during_runs.values(), *final.values())):
        return status
    # Killed or not, a mutant whose code never ran proves nothing about the suite.
    return "not planted"


def run_control(run: dict[str, Any], version: str, history_root: Path) -> dict[str, Any]:
    """In this process: the scenario run ``run`` on the release, no mutant planted, as a mutant's
    runs go (the same start timeout, stopped at the first failure): did it end as on the release?"""
    from pytest_elr.backends.kafka import START_TIMEOUT_ENV, KafkaBackend
    from pytest_elr.scenario.executor import run_scenario
    from pytest_elr.scenario.loader import load_scenario
    from pytest_elr.sut.instrument import COVERAGE_ENV, MUTANT_ENV

    os.environ.pop(MUTANT_ENV, None)
    os.environ.pop(COVERAGE_ENV, None)
    os.environ.setdefault(START_TIMEOUT_ENV, str(MUTANT_START_TIMEOUT_S))
    scenario = load_scenario(run["scenario_file"])
    pool = KafkaBackend.new_session()
    try:
        backend = KafkaBackend(session=pool, version=version)
        try:
            result = run_scenario(scenario, backend, run["profile"], history_root, stop_at_first_failure=True)
        except Exception as exc:  # the harness could not finish the run, unmutated
            return {"passed": False, "at": None, "kind": "error", "failures": [],
                    "message": f"{type(exc).__name__}: {exc}"[:1500]}
    finally:
        pool.close()
    outcome, detail = run_outcome(scenario, version, result)
    if outcome == "pass":
        return {"passed": True, "at": None, "failures": []}
    return {"passed": False, "at": detail.get("at"), "kind": detail.get("kind", outcome),
            "failures": detail.get("failures", []), "message": detail.get("message", "")[:1500]}


# ---------------------------------------------------------------------------------- controls


class Controls:
    """The campaign's controls: a scenario that is the first to fail under a mutant is run once
    unmutated, on the same release and profile, and the mutant's kill stands only if that run ends
    as on the release. A scenario failing for a reason of its own (a flake, a harness bug, the
    machine's load) would otherwise kill every mutant it covers, each at the same step.

    One control per scenario, profile and release per campaign shard: kept in
    ``CAMPAIGN/controls-<K>of<N>.jsonl`` as each ends, so later mutants (and a resumed campaign)
    reuse it. Mutants running at once that need the same control wait for the one run.
    ``forget_failed``: failed controls are run again (``run --retry 'control failed'``)."""

    def __init__(self, path: Path, version: str, run: Any, *, forget_failed: bool = False) -> None:
        self.path, self.version, self._run = path, version, run
        self._lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        self.known: dict[str, dict[str, Any]] = {}
        for row in path.read_text().splitlines() if path.is_file() else []:
            if row.strip():
                control = json.loads(row)
                self.known[control["key"]] = control
        if forget_failed:
            self.known = {k: c for k, c in self.known.items() if c["passed"]}

    def key(self, by: dict[str, Any]) -> str:
        return f"{by['scenario']} [{by['profile']}] on {self.version}"

    def of(self, by: dict[str, Any], history: Path) -> dict[str, Any] | None:
        """The control of the run ``by`` names, run now unless known; None when the campaign is
        being stopped (nothing is kept)."""
        key = self.key(by)
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            if key in self.known:
                return self.known[key]
            ran = self._run({"scenario_file": by["scenario_file"], "profile": by["profile"]}, self.version,
                            history / ("control-" + hashlib.sha256(key.encode()).hexdigest()[:16]))
            if ran is None:
                return None
            control = {"key": key, "scenario": by["scenario"], "profile": by["profile"],
                       "kafka_version": self.version, **ran,
                       "ran_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            with self._lock:
                with self.path.open("a") as f:
                    f.write(json.dumps(control) + "\n")
                self.known[key] = control
            return control


def judged_by_control(result: dict[str, Any], control: dict[str, Any]) -> dict[str, Any]:
    """A killed mutant's result with its control beside it: ``control failed`` (not a kill) when
    the scenario also failed unmutated, at the kill's step or anywhere else."""
    kill_step = (result.get("by") or {}).get("at")
    summary = {"scenario": control["scenario"], "profile": control["profile"], "passed": control["passed"],
               "at": control.get("at"), "seconds": control.get("seconds"),
               "same_step": bool(not control["passed"] and control.get("at") and control.get("at") == kill_step)}
    if not control["passed"]:
        summary.update(failures=control.get("failures", [])[:5], message=control.get("message", "")[:400])
    return {**result, "status": "killed" if control["passed"] else "control failed", "control": summary}


def judged_no_start(result: dict[str, Any], control: dict[str, Any]) -> dict[str, Any]:
    """A no-start with an unmutated start of its scenario beside it: the no-start stands when the
    unmutated cluster started (whatever its run did then); when it did not start either the machine
    could not start a cluster at that moment (stop 44: a no-start at load 25 was killed in 51 s when
    run again), so it is ``control failed``, counted apart and run again with ``--retry``."""
    started = control.get("kind") != "no-start"
    summary = {"scenario": (result.get("by") or {}).get("scenario"), "passed": bool(control["passed"]),
               "started": started, "at": control.get("at"), "seconds": control.get("seconds")}
    if not started:
        summary["message"] = "the unmutated cluster did not start either: " + control.get("message", "")[:300]
    return {**result, "status": "no-start" if started else "control failed", "control": summary}


def controls_of(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Every control run in these campaign directories (each shard's own file)."""
    found: list[dict[str, Any]] = []
    for path in paths:
        for f in sorted(path.glob("controls-*.jsonl")) if path.is_dir() else []:
            found += [json.loads(row) for row in f.read_text().splitlines() if row.strip()]
    return found


def control_cost(results: dict[str, dict[str, Any]], controls: Sequence[dict[str, Any]]) -> str:
    """What the controls cost the kills they judged."""
    # a no-start's start control judged no kill
    judged = [r for r in results.values() if r.get("control") and "started" not in r["control"]]
    # (Kafka's unit tests grade against their own unmutated run: ``kafka_unit_tests``' baseline)
    unjudged = sum(1 for r in results.values() if r["status"] == "killed" and not r.get("control")
                   and r.get("grader") is None)
    spent = sum(float(c.get("seconds") or 0) for c in controls)
    line = (f"controls: {len(controls)} unmutated runs, {spent:.0f} s in all, judged {len(judged)} kills"
            + (f" ({spent / len(judged):.1f} s a kill)" if judged else ""))
    if unjudged:
        line += f"; {unjudged} kills graded before controls have none"
    return line


# ---------------------------------------------------------------------------------- campaign


class ArgumentsError(ValueError):
    """An ``equivalent.tsv`` that cannot be read: its file, line and what was expected."""


def arguments_of(paths: Iterable[Path]) -> dict[str, str]:
    """The mutants argued equivalent in these campaign directories (``ARGUMENTS_FILE``), id -> reason."""
    found: dict[str, str] = {}
    for path in paths:
        f = (path if path.is_dir() else path.parent) / ARGUMENTS_FILE
        if not f.is_file():
            continue
        for number, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("#"):  # a mutant id has a '#' of its own
                continue
            mutant_id, _, reason = line.strip().partition("\t")
            if not reason.strip() or mutant_id.count(":") < 3 or "#" not in mutant_id:
                raise ArgumentsError(f"{f}:{number}: expected a mutant id (Class#method(desc):line:OPERATOR:index), "
                                     f"a tab, and the reason it is equivalent; got {line[:120]!r}")
            found[mutant_id.strip()] = reason.strip()
    return found


def results_of(paths: Iterable[Path]) -> dict[str, dict[str, Any]]:
    """Every result in these campaign directories or files, by mutant id (the last one wins); a
    survivor or timed-out row of a mutant argued equivalent (``ARGUMENTS_FILE``) is ``equivalent``,
    a killed one keeps its kill and names the argument it refutes."""
    paths = list(paths)
    found: dict[str, dict[str, Any]] = {}
    for path in paths:
        files = sorted(path.glob("results-*.jsonl")) if path.is_dir() else [path] if path.is_file() else []
        for f in files:
            for row in f.read_text().splitlines():
                if row.strip():
                    r = json.loads(row)
                    found[r["id"]] = r
    for mutant_id, reason in arguments_of(paths).items():
        row = found.get(mutant_id)
        if row is None:  # argued before it ran (a campaign skips it): classified all the same
            parts = MUTANT_ID.fullmatch(mutant_id)
            if parts is not None:
                found[mutant_id] = {"id": mutant_id, "class_name": parts[1], "method": parts[2], "desc": parts[3],
                                    "line": int(parts[4]), "operator": parts[5], "index": int(parts[6]),
                                    "description": "", "status": "equivalent", "graded_as": "not run",
                                    "argument": reason}
            continue
        if row["status"] in EXPLAINED_BY_EQUIVALENCE:
            found[mutant_id] = {**row, "status": "equivalent", "graded_as": row["status"], "argument": reason}
        elif row["status"] == "killed":
            found[mutant_id] = {**row, "refutes_argument": reason}
    return found


def runs_digest(runs: Sequence[dict[str, Any]]) -> str:
    """The covering runs of a mutant, in their order, as a short digest: a timed-out mutant
    resumes only where the same runs are in the same order."""
    names = "\n".join(f"{r['scenario_file']} {r['profile']}" for r in runs)
    return hashlib.sha256(names.encode()).hexdigest()[:16]


def resume_point(previous: dict[str, Any] | None, runs: Sequence[dict[str, Any]]) -> int:
    """How many of ``runs`` a mutant cut off by its time limit already got through, each ending as on
    the real release with the mutant planted: a retry starts after them. 0 for any other row, or
    when the covering runs are not the ones it was cut off in (a row of before the digest is
    matched on their number). The last run is always run again: the plant is read on its cluster."""
    if not previous or previous.get("status") != "timed out" or previous.get("runs_total") != len(runs):
        return 0
    if previous.get("runs_digest", runs_digest(runs)) != runs_digest(runs):
        return 0
    return max(0, min(int(previous.get("runs_tried", 0)), len(runs) - 1))


def run_campaign(mutants: Sequence[Mutant], index: CoverageIndex, out: Path, *, budget_s: float,
                 shard: tuple[int, int], mutant_timeout_s: float,
                 retry: frozenset[str] = frozenset(), parallel: int = 1,
                 from_start: bool = False, retried_only: bool = False) -> list[dict[str, Any]]:
    """Each mutant of this shard not graded yet (or whose status is in ``retry``), until the budget,
    up to ``parallel`` at once (each in a child process with its own cluster). A kill is judged by
    its scenario's control (``Controls``: run unmutated once per scenario in this shard, in the
    same worker, so never more than ``parallel`` clusters). This process alone writes the results
    file, a line per mutant as each ends; the budget stops starting mutants (running ones finish);
    an interrupt (Ctrl-C, SIGTERM) stops every child before it goes on. A timed-out mutant run
    again (``retry``) goes on after the covering runs it got through (``resume_point``) unless
    ``from_start``. ``retried_only``: none never graded, only the rows ``retry`` names."""
    out.mkdir(parents=True, exist_ok=True)
    results_file = out / f"results-{shard[0]}of{shard[1]}.jsonl"
    controls = Controls(out / f"controls-{shard[0]}of{shard[1]}.jsonl", index.kafka_version,
                        lambda run, version, history: _control(run, version, history, mutant_timeout_s),
                        forget_failed="control failed" in retry)
    latest = results_of([out])
    done = {i: r for i, r in latest.items() if r["status"] not in retry}
    argued = {} if "equivalent" in retry else arguments_of([out])
    todo = [m for m in mutants if in_shard(m.id, shard) and m.id not in done and m.id not in argued
            and (m.id in latest or not retried_only)]
    started = time.monotonic()
    new: list[dict[str, Any]] = []
    print(f"elr kafka-mutants: {len(todo)} to run in shard {shard[0]}/{shard[1]} ({len(done)} done before)",
          flush=True)

    def record(mutant: Mutant, result: dict[str, Any], seconds: float) -> None:
        row = {**asdict(mutant), **result, "seconds": round(seconds, 1),
               "shard": f"{shard[0]}/{shard[1]}", "kafka_version": index.kafka_version}
        with results_file.open("a") as f:
            f.write(json.dumps(row) + "\n")
        new.append(row)
        by = row.get("by") or {}
        how = f"  <- {by.get('scenario')} [{by.get('profile')}]: {', '.join(by.get('failures') or [])}" if by else ""
        print(f"[{len(new)}/{len(todo)}] {row['status']:<11} {row['seconds']:>6.0f}s  {mutant.in_words()}{how}"
              + (f"; {control_words(row['control'])}" if row.get("control") else ""), flush=True)

    def timed_child(mutant: Mutant, runs: list[dict[str, Any]]) -> tuple[dict[str, Any], float]:
        t0 = time.monotonic()
        skip = 0 if from_start else resume_point(latest.get(mutant.id), runs)
        result = _child(mutant, runs[skip:], index.kafka_version, child_history(out, mutant), mutant_timeout_s)
        seconds = time.monotonic() - t0  # the mutant's own time: a control is counted apart (its row, its file)
        if result["status"] == "timed out":
            result["runs_digest"] = runs_digest(runs)
        if skip:
            earlier = latest[mutant.id]
            result = {**result, "runs_tried": result.get("runs_tried", 0) + skip, "resumed_after": skip,
                      "earlier_seconds": round(earlier.get("seconds", 0.0) + earlier.get("earlier_seconds", 0.0), 1),
                      **({"runs_total": len(runs)} if "runs_total" in result else {})}
        by = result.get("by") or {}
        if result["status"] == "killed" and by.get("scenario_file"):
            control = controls.of(by, out / "history")
            result = judged_by_control(result, control) if control is not None else {**result, "status": "interrupted"}
        elif result["status"] == "no-start" and by.get("scenario_file"):
            # A start that fails may be the machine's, not the mutant's: the same scenario unmutated, now
            # (never a cached control: the question is whether a cluster starts at this moment).
            control = _control(by, index.kafka_version, child_history(out, mutant) / "start-control", mutant_timeout_s)
            result = judged_no_start(result, control) if control is not None else {**result, "status": "interrupted"}
        return result, seconds

    running: dict[Future[tuple[dict[str, Any], float]], Mutant] = {}
    _stopping.clear()
    pool = ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix="kafka-mutant")
    try:
        with sigterm_interrupts():
            queue = iter(enumerate(todo))
            spent = False
            while True:
                while not spent and len(running) < parallel:
                    i, mutant = next(queue, (len(todo), None))
                    if mutant is None:
                        spent = True
                    elif time.monotonic() - started > budget_s:
                        print(f"budget spent: {len(todo) - i} mutants left for a later run (it resumes)", flush=True)
                        spent = True
                    elif runs := index.covering_runs(mutant):
                        running[pool.submit(timed_child, mutant, runs)] = mutant
                    else:
                        record(mutant, {"status": "uncovered", "runs_tried": 0}, 0.0)
                if not running:
                    break
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    result, seconds = future.result()
                    record(running.pop(future), result, seconds)
    except BaseException:
        # Ctrl-C or SIGTERM: the children are stopped (each removes its containers) before this
        # process goes; the mutants they ran are not graded, and a later run runs them again.
        stop_children()
        raise
    finally:
        pool.shutdown(wait=True)
    return new


def child_history(out: Path, mutant: Mutant) -> Path:
    """The mutant's own history directory: children running at once never share one."""
    return out / "history" / hashlib.sha256(mutant.id.encode()).hexdigest()[:16]


#: the children running now, for ``stop_children``; once it is set, no child starts
_children: set[subprocess.Popen[str]] = set()
_children_lock = threading.Lock()
_stopping = threading.Event()


def stop_children(grace_s: float = 120.0) -> None:
    """SIGTERM to every running child (it removes its containers), SIGKILL after ``grace_s``."""
    with _children_lock:
        _stopping.set()
        children = list(_children)
    for child in children:
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for child in children:
        try:
            child.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def child_command(spec: str) -> list[str]:
    """The child process that grades one mutant (``_child_main``)."""
    return [sys.executable, "-m", "pytest_elr.schedule.kafka_mutants", spec]


def _child(mutant: Mutant, runs: Sequence[dict[str, Any]], version: str, history: Path,
           timeout_s: float) -> dict[str, Any]:
    """One mutant in a child process: a hung cluster is stopped (SIGTERM: it removes its containers)."""
    spec = json.dumps({"mutant": mutant.id, "runs": [{"scenario_file": r["scenario_file"], "profile": r["profile"]}
                                                      for r in runs], "version": version, "history": str(history)})
    child = _start_child(spec)
    if child is None:  # the campaign is being interrupted: this mutant is not graded
        return {"status": "interrupted", "runs_tried": 0}
    try:
        stdout, stderr = child.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stdout = _stop_child(child)
        # A kill ends at the first covering run that tells: the runs it finished all ended as on
        # the real release, so a mutant cut off late is most likely a survivor (``summary``).
        passed = [json.loads(ln)["progress"] for ln in (stdout or "").splitlines() if ln.startswith('{"progress"')]
        return {"status": "timed out", "runs_tried": max(passed, default=0), "runs_total": len(runs)}
    finally:
        with _children_lock:
            _children.discard(child)
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    if child.returncode != 0 or not lines:
        return {"status": "not planted", "error": (stderr or stdout).strip()[-1500:]}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _start_child(spec: str) -> subprocess.Popen[str] | None:
    """A child process on ``spec`` (``_child_main``), known to ``stop_children``; None once the
    campaign is being stopped."""
    with _children_lock:
        if _stopping.is_set():
            return None
        child = subprocess.Popen(child_command(spec), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _children.add(child)
        return child


def _stop_child(child: subprocess.Popen[str]) -> str:
    """A child past its time: SIGTERM (it removes its containers), SIGKILL after 120 s; what it printed."""
    child.send_signal(signal.SIGTERM)
    try:
        stdout, _ = child.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        child.kill()
        stdout, _ = child.communicate()
    return stdout or ""


def _control(run: dict[str, Any], version: str, history: Path, timeout_s: float) -> dict[str, Any] | None:
    """The control (``run_control``) in a child process, timed; None when the campaign is being
    stopped. A control that cannot end is a failed one: the scenario cannot be trusted now."""
    t0 = time.monotonic()
    child = _start_child(json.dumps({"control": run, "version": version, "history": str(history)}))
    if child is None:
        return None
    try:
        stdout, stderr = child.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _stop_child(child)
        return {"passed": False, "at": None, "kind": "timed out", "failures": [],
                "message": f"the unmutated run did not end within {timeout_s:.0f} s",
                "seconds": round(time.monotonic() - t0, 1)}
    finally:
        with _children_lock:
            _children.discard(child)
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    if child.returncode != 0 or not lines:
        if _stopping.is_set():
            return None
        return {"passed": False, "at": None, "kind": "error", "failures": [],
                "message": f"the control's process failed: {(stderr or stdout).strip()[-1200:]}",
                "seconds": round(time.monotonic() - t0, 1)}
    control: dict[str, Any] = {**json.loads(lines[-1]), "seconds": round(time.monotonic() - t0, 1)}
    return control


# ---------------------------------------------------------------------------------- report


def summary(results: dict[str, dict[str, Any]]) -> tuple[list[str], dict[str, int]]:
    """The table per method (killed / survived / other), then the totals; survivors in words."""
    counts: Counter[str] = Counter(r["status"] for r in results.values())
    by_method: dict[str, Counter[str]] = {}
    for r in results.values():
        key = f"{r['class_name'].rsplit('.', 1)[-1]}.{r['method']}"
        by_method.setdefault(key, Counter())[r["status"]] += 1
    width = max((len(k) for k in by_method), default=10)
    lines = [f"{'method':<{width}}  killed  survived  equivalent  control-failed  no-start  timed-out  not-planted"
             "  uncovered"]
    for key in sorted(by_method):
        c = by_method[key]
        lines.append(f"{key:<{width}}  {c['killed']:>6}  {c['survived']:>8}  {c['equivalent']:>10}"
                     f"  {c['control failed']:>14}  {c['no-start']:>8}  {c['timed out']:>9}  {c['not planted']:>11}"
                     f"  {c['uncovered']:>9}")
    # a "control failed" is neither a kill nor a survivor: its scenario failed unmutated too
    graded = counts["killed"] + counts["survived"]
    lines.append(f"killed {counts['killed']} of {graded} planted and graded"
                 + (f" ({100 * counts['killed'] / graded:.0f}%)" if graded else "")
                 + f"; argued equivalent {counts['equivalent']}; no-start {counts['no-start']}, control failed "
                   f"{counts['control failed']}, timed out {counts['timed out']}, not planted "
                   f"{counts['not planted']}, uncovered {counts['uncovered']}")
    refuted = [r for r in results.values() if r.get("refutes_argument")]
    if refuted:
        lines.append("argued equivalent, yet killed (the argument is wrong: take it out of equivalent.tsv):")
        lines += [f"  {Mutant(**{k: r[k] for k in Mutant.__dataclass_fields__}).in_words()}  [{r['id']}]: "
                  f"argued \"{r['refutes_argument'][:160]}\""
                  for r in sorted(refuted, key=lambda r: (r["class_name"], r["line"], r["id"]))]
    survivors = [r for r in results.values() if r["status"] == "survived"]
    if survivors:
        lines.append("survivors:")
        lines += [f"  {Mutant(**{k: r[k] for k in Mutant.__dataclass_fields__}).in_words()}  [{r['id']}]"
                  for r in sorted(survivors, key=lambda r: (r["class_name"], r["line"], r["id"]))]
    cut_off = [r for r in results.values() if r["status"] == "timed out"]
    if cut_off:
        lines.append("timed out (a kill ends at the first covering run that tells, so the runs finished all "
                     "ended as on the real release: the further one got, the likelier a survivor):")
        lines += [f"  {Mutant(**{k: r[k] for k in Mutant.__dataclass_fields__}).in_words()}  [{r['id']}]: "
                  + (f"{r['runs_tried']} of {r['runs_total']} covering runs as on the real release"
                     if r.get("runs_total") else "runs finished not recorded")
                  for r in sorted(cut_off, key=lambda r: (r["class_name"], r["line"], r["id"]))]
    unjudged = [r for r in results.values() if r["status"] == "control failed"]
    if unjudged:
        lines.append("control failed (the scenario that failed under the mutant failed unmutated too: no kill; "
                     "grade again with --retry 'control failed'):")
        lines += [f"  {Mutant(**{k: r[k] for k in Mutant.__dataclass_fields__}).in_words()}  [{r['id']}]: "
                  f"{r['by'].get('scenario')} at {r['by'].get('at') or 'an error'}; {control_words(r['control'])}"
                  for r in sorted(unjudged, key=lambda r: (r["class_name"], r["line"], r["id"]))]
    return lines, dict(counts)


def control_words(control: dict[str, Any]) -> str:
    """A row's control in words: ``control passed (38 s)``, ``control failed at X, the kill's step``."""
    if control.get("started") is True:
        return f"an unmutated start succeeded ({control.get('seconds') or 0:.0f} s)"
    if control["passed"]:
        return f"control passed ({control.get('seconds') or 0:.0f} s)"
    where = f"at {control['at']}" if control.get("at") else f"({control.get('message', '')[:120]})"
    return f"control failed {where}" + (", the kill's step" if control.get("same_step") else "")


def html_page(results: dict[str, dict[str, Any]], title: str,
              controls: Sequence[dict[str, Any]] | None = None) -> str:
    rows = []
    for r in sorted(results.values(), key=lambda r: (r["class_name"], r["method"], r["line"], r["operator"])):
        by = r.get("by") or {}
        why = html.escape(f"{by.get('scenario', '')} [{by.get('profile', '')}]: "
                          f"{'; '.join(by.get('failures') or []) or by.get('message', '')[:200]}"
                          + (f" -- {control_words(r['control'])}" if r.get("control") else "")) if by else \
            html.escape(f"argued: {r['argument']}") if r.get("argument") else ""
        rows.append(f"<tr class='{r['status'].replace(' ', '-')}'><td>{html.escape(r['class_name'].rsplit('.', 1)[-1])}"
                    f".{html.escape(r['method'])}</td><td>{r['line']}</td><td>{r['operator']}</td>"
                    f"<td>{html.escape(r['description'])}</td><td>{r['status']}</td><td>{why}</td></tr>")
    table, _ = summary(results)
    if controls is not None:
        table.append(control_cost(results, controls))
    return ("<!doctype html><meta charset='utf-8'><title>" + html.escape(title) + "</title><style>"
            "body{font:14px sans-serif;margin:1em}td,th{border-bottom:1px solid #ddd;padding:2px 6px;text-align:left}"
            ".killed td:nth-child(5){color:#070}.survived td:nth-child(5){color:#b00;font-weight:bold}"
            ".control-failed td:nth-child(5){color:#a60}"
            "pre{background:#f6f6f6;padding:.5em}</style><h1>" + html.escape(title) + "</h1><pre>"
            + html.escape("\n".join(table)) + "</pre><table><tr><th>method</th><th>line</th><th>operator</th>"
            "<th>change</th><th>status</th><th>by</th></tr>" + "".join(rows) + "</table>")


# ---------------------------------------------------------------------------------- commands


def _covered(mutants: Sequence[Mutant], index: CoverageIndex) -> list[Mutant]:
    """The mutants worth a cluster: on a covered line, and not equivalent by construction."""
    return [m for m in mutants if m.equivalent is None and index.covering_runs(m)]


def list_main(argv: list[str] | None = None) -> int:
    parser = command_parser("kafka-mutants list", __doc__)
    parser.add_argument("--coverage", type=Path, required=True, help="an `elr kafka-coverage --out` directory")
    parser.add_argument("--all", action="store_true", help="also mutants on lines no run covers")
    args = parser.parse_args(argv)
    index = CoverageIndex(args.coverage / "lines.json")
    mutants = enumerate_mutants(index.kafka_version)
    shown = mutants if args.all else _covered(mutants, index)
    for m in shown:
        print(f"{m.id}\t{m.description}")
    print(f"{len(shown)} mutants ({len(_covered(mutants, index))} on covered lines, {len(mutants)} in the target "
          f"methods of Kafka {index.kafka_version})", file=sys.stderr)
    return 0


def run_main(argv: list[str] | None = None) -> int:
    parser = command_parser("kafka-mutants run", __doc__)
    parser.add_argument("--coverage", type=Path, required=True, help="an `elr kafka-coverage --out` directory")
    parser.add_argument("--out", type=Path, required=True, help="the campaign's directory (results, histories)")
    parser.add_argument("--budget", type=parse_duration, default=float("inf"), help="stop starting mutants after this")
    parser.add_argument("--shard", type=parse_shard, default=(1, 1), help="K/N: this machine's share")
    parser.add_argument("--mutant", action="append", default=[], help="only this mutant id (repeatable)")
    parser.add_argument("--method", default=None, help="only mutants of methods matching this regex")
    parser.add_argument("--mutant-timeout", type=parse_duration, default=DEFAULT_MUTANT_TIMEOUT_S)
    parser.add_argument("--retry", action="append", default=[], choices=STATUSES,
                        help="run again the mutants that ended so (a later result replaces the earlier)")
    parser.add_argument("--parallel", type=parallel_count, default=None,
                        help="mutants at once, each on a cluster of its own (default: the clusters this machine "
                             "carries, pytest_elr.sut.capacity.cluster_slots)")
    parser.add_argument("--from-start", action="store_true",
                        help="with --retry 'timed out': run every covering run again (by default a mutant cut "
                             "off goes on after the runs it got through)")
    parser.add_argument("--retried-only", action="store_true",
                        help="with --retry: only the mutants whose last result has that status, none never graded "
                             "(by default a retry also starts every covered mutant not graded yet)")
    args = parser.parse_args(argv)
    if args.retried_only and not args.retry:
        parser.error("--retried-only: give the status to run again with --retry")
    index = CoverageIndex(args.coverage / "lines.json")
    mutants = enumerate_mutants(index.kafka_version)
    if args.mutant:
        known = {m.id: m for m in mutants}
        unknown = [i for i in args.mutant if i not in known]
        if unknown:
            print(f"elr kafka-mutants run: no such mutant in Kafka {index.kafka_version}: {unknown[0]}",
                  file=sys.stderr)
            return 2
        mutants = [known[i] for i in args.mutant]
    else:
        mutants = _covered(mutants, index)
    if args.method:
        mutants = [m for m in mutants if re.search(args.method, m.short_method)]
    if not mutants:
        print("elr kafka-mutants run: no mutant to run (none covered, or the filters left none)", file=sys.stderr)
        return 2
    try:
        arguments_of([args.out])
    except ArgumentsError as exc:
        print(f"elr kafka-mutants run: {exc}", file=sys.stderr)
        return 2
    missing = sorted({r["scenario_file"] for m in mutants for r in index.covering_runs(m)
                      if not Path(r["scenario_file"]).is_file()})
    if missing:
        # A missing file would end each mutant's child in an error: refuse before any cluster starts.
        print(f"elr kafka-mutants run: {index.path}: {len(missing)} scenario file(s) its runs name are not there, "
              f"nor under scenarios/ of the current directory: {', '.join(missing[:3])}"
              + (" ..." if len(missing) > 3 else ""), file=sys.stderr)
        return 2
    run_campaign(mutants, index, args.out, budget_s=args.budget, shard=args.shard,
                 mutant_timeout_s=args.mutant_timeout, retry=frozenset(args.retry),
                 parallel=args.parallel or cluster_slots(), from_start=args.from_start,
                 retried_only=args.retried_only)
    results = results_of([args.out])
    lines, _ = summary(results)
    print("\n".join([*lines, control_cost(results, controls_of([args.out]))]))
    return 0


def report_main(argv: list[str] | None = None) -> int:
    parser = command_parser("kafka-mutants report", __doc__)
    parser.add_argument("campaigns", nargs="+", type=Path, help="campaign directories or results files (shards)")
    parser.add_argument("--html", type=Path, default=None, help="write the campaign's page here")
    parser.add_argument("--json", type=Path, default=None, help="write the merged results here")
    args = parser.parse_args(argv)
    try:
        results = results_of(args.campaigns)
    except ArgumentsError as exc:
        print(f"elr kafka-mutants report: {exc}", file=sys.stderr)
        return 2
    if not results:
        print("elr kafka-mutants report: no results in " + ", ".join(map(str, args.campaigns)), file=sys.stderr)
        return 2
    lines, _ = summary(results)
    controls = controls_of(args.campaigns)
    print("\n".join([*lines, control_cost(results, controls)]))
    if args.html:
        args.html.write_text(html_page(results, "Kafka mutants graded by the pytest-elr suite", controls))
    if args.json:
        args.json.write_text(json.dumps(sorted(results.values(), key=lambda r: r["id"]), indent=1))
    return 0


def _child_main(spec_json: str) -> int:
    spec = json.loads(spec_json)
    # SIGTERM (the campaign stopped, or this mutant's time is up) unwinds run_one, whose cluster pool
    # then removes its containers: the default action would end the process with them running.
    with sigterm_interrupts():
        if "control" in spec:
            result = run_control(spec["control"], spec["version"], Path(spec["history"]))
        else:
            result = run_one(spec["mutant"], spec["runs"], spec["version"], Path(spec["history"]))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1]))
