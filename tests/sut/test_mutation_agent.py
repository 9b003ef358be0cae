"""The mutation agent (pytest_elr/sut/agents/ElrMutants.java) on a class of our own: every operator
is listed where it applies, planting it changes what the method computes (and the JVM's verifier
accepts the rewritten class), and an id that names no site is reported, not silently ignored.

Needs a JDK and Maven Central (the agents' build); no Docker."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pytest_elr.schedule.kafka_mutants import Mutant
from pytest_elr.sut.instrument import build_agents

PROBE = """
import java.util.ArrayList;
import java.util.List;

public class Probe {
    static int calls = 0;
    static void touch() { calls += 10; }
    static boolean atLeastTwo(int n) { return n >= 2; }
    static boolean isNull(Object o) { return o == null; }
    static List<Integer> upTo(int n) {
        List<Integer> out = new ArrayList<>();
        for (int i = 0; i < n; i++) { out.add(i); }
        return out;
    }
    public static void main(String[] args) {
        touch();
        System.out.println(atLeastTwo(2) + " " + atLeastTwo(1) + " " + isNull(null) + " " + upTo(3) + " " + calls);
    }
}
"""
CLEAN = "true false true [0, 1, 2] 10"


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Mutant]]:
    agents = build_agents()
    d = tmp_path_factory.mktemp("probe")
    (d / "Probe.java").write_text(PROBE)
    subprocess.run(["javac", "--release", "11", "-d", str(d), str(d / "Probe.java")], check=True)
    (d / "probe.jar").unlink(missing_ok=True)
    subprocess.run(["jar", "cf", str(d / "probe.jar"), "-C", str(d), "Probe.class"], check=True)
    listed = subprocess.run(["java", "-cp", agents.classpath(), "ElrMutants", "list", str(d / "probe.jar"),
                             "--class", "Probe"], capture_output=True, text=True, check=True).stdout
    return d, [Mutant.parse(row) for row in listed.splitlines()]


def run_probe(d: Path, mutant_id: str | None) -> tuple[str, str]:
    """The probe's output with the mutant planted, and what the agent says it planted."""
    planted = d / "planted"
    planted.unlink(missing_ok=True)
    agent = [f"-javaagent:{build_agents().mutants}={mutant_id}"] if mutant_id else []
    env = {**{k: v for k, v in os.environ.items() if k != "JAVA_TOOL_OPTIONS"}, "ELR_MUTANT_PLANTED_FILE": str(planted)}
    out = subprocess.run(["java", "-Xshare:auto", *agent, "-cp", str(d), "Probe"], capture_output=True, text=True,
                         env=env, check=True).stdout.strip()
    return out, planted.read_text().strip() if planted.exists() else ""


def find(mutants: list[Mutant], method: str, operator: str, index: int = 0) -> Mutant:
    return next(m for m in mutants if m.method == method and m.operator == operator and m.index == index)


def test_every_operator_is_listed_where_it_applies(probe: tuple[Path, list[Mutant]]) -> None:
    _, mutants = probe
    ops = {(m.method, m.operator) for m in mutants}
    assert ("atLeastTwo", "NEGATE_CONDITIONALS") in ops
    assert ("atLeastTwo", "CONDITIONALS_BOUNDARY") in ops
    assert ("main", "VOID_METHOD_CALLS") in ops
    assert ("upTo", "EMPTY_RETURNS") in ops
    assert ("upTo", "INCREMENTS") in ops
    assert ("isNull", "NEGATE_CONDITIONALS") in ops
    # a boolean method's computed return may become either constant
    assert {("atLeastTwo", "TRUE_RETURNS"), ("atLeastTwo", "FALSE_RETURNS")} <= ops
    assert all(m.class_name == "Probe" and m.line > 0 for m in mutants)


@pytest.mark.parametrize(("method", "operator", "index", "expected"), [
    # `n >= 2` compiles to a jump on `n < 2`: negated, 2 is not at least two and 1 is
    ("atLeastTwo", "NEGATE_CONDITIONALS", 0, "false true true [0, 1, 2] 10"),
    # boundary: the jump on `n < 2` becomes `n <= 2`, so 2 is no longer at least two
    ("atLeastTwo", "CONDITIONALS_BOUNDARY", 0, "false false true [0, 1, 2] 10"),
    ("isNull", "NEGATE_CONDITIONALS", 0, "true false false [0, 1, 2] 10"),
    ("upTo", "EMPTY_RETURNS", 0, "true false true [] 10"),
])  # a removed i++ never ends the loop: test_a_removed_increment_changes_the_loop
def test_planting_changes_what_the_method_computes(probe: tuple[Path, list[Mutant]], method: str, operator: str,
                                                   index: int, expected: str) -> None:
    d, mutants = probe
    assert run_probe(d, None)[0] == CLEAN
    mutant = find(mutants, method, operator, index)
    out, planted = run_probe(d, mutant.id)
    assert out == expected
    assert planted == mutant.id


def test_a_removed_void_call_and_a_constant_return(probe: tuple[Path, list[Mutant]]) -> None:
    d, mutants = probe
    touch = next(m for m in mutants if m.method == "main" and m.operator == "VOID_METHOD_CALLS"
                 and "Probe.touch" in m.description)
    assert run_probe(d, touch.id)[0] == "true false true [0, 1, 2] 0"
    assert run_probe(d, find(mutants, "atLeastTwo", "TRUE_RETURNS").id)[0] == "true true true [0, 1, 2] 10"
    assert run_probe(d, find(mutants, "atLeastTwo", "FALSE_RETURNS").id)[0] == "false false true [0, 1, 2] 10"


def test_a_removed_increment_changes_the_loop(tmp_path: Path, probe: tuple[Path, list[Mutant]]) -> None:
    d, mutants = probe
    inc = find(mutants, "upTo", "INCREMENTS")
    # upTo(3) would never end without its i++; the JVM is stopped by a bounded heap
    planted = tmp_path / "planted"
    env = {**{k: v for k, v in os.environ.items() if k != "JAVA_TOOL_OPTIONS"}, "ELR_MUTANT_PLANTED_FILE": str(planted)}
    p = subprocess.run(["java", "-Xmx32m", f"-javaagent:{build_agents().mutants}={inc.id}", "-cp", str(d), "Probe"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode != 0 and "OutOfMemoryError" in p.stderr
    assert planted.read_text().strip() == inc.id


def test_an_id_that_names_no_site_is_reported(probe: tuple[Path, list[Mutant]]) -> None:
    d, mutants = probe
    real = find(mutants, "atLeastTwo", "NEGATE_CONDITIONALS")
    wrong_line = real.id.replace(f":{real.line}:", f":{real.line + 100}:")
    out, planted = run_probe(d, wrong_line)
    assert out == CLEAN
    assert planted == f"missing: {wrong_line}"
