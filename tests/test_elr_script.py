"""``./elr test``, the README's test command and CI's: its sessions, their selection, its exit code.

The script runs in a copy of the checkout's ``elr`` whose installs are stubbed (a ``python3`` on PATH
that logs its arguments and answers with the code the test gives each pytest session), so what is
held here is the script's own logic, not the tests it runs."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "elr"

FAKE_PYTHON = """#!/usr/bin/env bash
# Logs its arguments; a pytest session answers with the code named for its -m (or its release).
echo "$*" >> "$ELR_FAKE_LOG"
case "$*" in
  *"-m pytest "*"not docker and not elr_scenario"*) exit "${RC_CPU:-0}" ;;
  *"-m pytest "*"docker or elr_scenario"*) exit "${RC_CLUSTERS:-0}" ;;
  *"-m pytest "*"--elr-kafka-version=4.0.2"*) exit "${RC_OLDEST:-0}" ;;
esac
exit 0
"""


def run_script(tmp_path: Path, **codes: int) -> tuple[int, list[str]]:
    """``./elr test -p no:randomly`` in a stubbed copy: its exit code and the pytest sessions it ran."""
    (tmp_path / "elr").write_text(SCRIPT.read_text())
    recipes = tmp_path / "pytest_elr" / "sut" / "recipes"
    recipes.mkdir(parents=True)
    (recipes / "setup-host.sh").write_text("true\n")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "python3").write_text(FAKE_PYTHON)
    (bindir / "python3").chmod(0o755)
    log = tmp_path / "calls.log"
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "ELR_FAKE_LOG": str(log),
           **{name.upper(): str(code) for name, code in codes.items()}}
    env.pop("PYTEST_ELR_PRUNE_IMAGES", None)
    done = subprocess.run(["bash", str(tmp_path / "elr"), "test", "-p", "no:randomly"], env=env,
                          capture_output=True, text=True, timeout=60)
    sessions = [line for line in log.read_text().splitlines() if line.startswith("-m pytest ")]
    return done.returncode, sessions


def test_three_sessions_each_given_the_users_arguments(tmp_path: Path) -> None:
    rc, sessions = run_script(tmp_path)
    assert rc == 0
    assert len(sessions) == 3, sessions
    assert "not docker and not elr_scenario" in sessions[0] and "-n auto" in sessions[0]
    assert "docker or elr_scenario" in sessions[1] and "-n" not in shlex.split(sessions[1])
    assert "--elr-kafka-version=4.0.2" in sessions[2]
    assert all("-p no:randomly" in s for s in sessions)


@pytest.mark.parametrize(("codes", "expected"), [
    ({"rc_cpu": 1}, 1),                    # a failure in the first session: the later ones still run
    ({"rc_clusters": 2}, 2),
    ({"rc_cpu": 1, "rc_oldest": 3}, 1),    # the first failing session's code
    ({"rc_cpu": 5}, 0),                    # nothing selected in one session, tests ran in others
    ({"rc_cpu": 5, "rc_clusters": 5, "rc_oldest": 5}, 5),  # nothing selected anywhere
    ({"rc_cpu": 5, "rc_clusters": 1}, 1),
])
def test_every_session_runs_and_the_first_failure_is_the_exit_code(
        tmp_path: Path, codes: dict[str, int], expected: int) -> None:
    rc, sessions = run_script(tmp_path, **codes)
    assert len(sessions) == 3, sessions
    assert rc == expected


def test_the_two_selections_split_every_test_once(pytester: pytest.Pytester) -> None:
    """The first release's two ``-m`` expressions, read from the script, select complementary sets:
    a plain test in the CPU session, a ``docker`` test and a scenario in the clusters' session."""
    expressions = re.findall(r'-m "([^"]+)"', SCRIPT.read_text())
    assert len(expressions) == 2, expressions
    pytester.makeini("""
        [pytest]
        markers = docker: needs a Docker engine
    """)
    pytester.makepyfile(test_mix="""
        import pytest

        def test_plain(): pass

        @pytest.mark.docker
        def test_cluster(): pass
    """)
    (pytester.path / "s.elr.yaml").write_text(Path(ROOT / "scenarios" / "kip966_last_replica_standing.elr.yaml")
                                             .read_text())
    selected = []
    for expression in expressions:
        result = pytester.runpytest("--elr-backend=model", "--collect-only", "-q", "-m", expression)
        selected.append({line.split("::")[-1] for line in result.outlines if "::" in line})
    cpu, clusters = selected
    assert cpu == {"test_plain"}
    assert "test_cluster" in clusters and any("[kafka]" in name for name in clusters)
    assert not cpu & clusters
