"""The ``elr`` command: it lists every command, and each command's own ``--help`` works."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_elr.cli import COMMANDS
from pytest_elr.core.commandline import plain

ROOT = Path(__file__).resolve().parents[1]


def elr(*args: str) -> subprocess.CompletedProcess[str]:
    """``elr ARGS`` as ``python -m pytest_elr`` from the checkout root (so it runs this checkout's code)."""
    return subprocess.run([sys.executable, "-m", "pytest_elr", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_help_lists_every_command() -> None:
    done = elr("--help")
    assert done.returncode == 0, done.stderr
    listed = [line[2:].split("  ")[0] for line in done.stdout.splitlines() if line.startswith("  ")]
    assert listed == list(COMMANDS)


def test_a_group_lists_its_commands_and_an_unknown_command_fails() -> None:
    bench = elr("bench", "--help")
    assert bench.returncode == 0, bench.stderr
    assert "bench model" in bench.stdout and "images" not in bench.stdout
    unknown = elr("no-such-command")
    assert unknown.returncode == 2 and "unknown command" in unknown.stderr


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_command_passes_help_through(name: str) -> None:
    done = elr(*name.split(), "--help")
    assert done.returncode == 0, done.stderr
    assert "-h, --help" in done.stdout  # the command's own argparse help, not elr's list
    assert done.stdout.startswith(f"usage: elr {name} "), done.stdout[:200]
    assert "python -m" not in done.stdout
    assert not MARKUP.findall(done.stdout), MARKUP.findall(done.stdout)


#: what reStructuredText would leave on a terminal: ``literal``, :role:`target`, `x`
MARKUP = re.compile(r"``|:[a-z]+:`|`[^`\n]+`")


def test_help_markup_becomes_plain_text() -> None:
    text = ("Runs ``elr search`` over :data:`pytest_elr.model.mutants.MUTANTS` and :func:`~.rollup.rollup_runs`;"
            " see `--out`.")
    assert MARKUP.findall(text)
    assert plain(text) == "Runs elr search over pytest_elr.model.mutants.MUTANTS and rollup_runs; see --out."


def test_a_near_miss_option_value_of_a_command_is_named() -> None:
    done = elr("search", "--profile", "kip96")
    assert done.returncode == 2
    assert "invalid choice: 'kip96'" in done.stderr and "(did you mean 'kip966'?)" in done.stderr, done.stderr


def test_version_and_a_near_miss_named() -> None:
    done = elr("--version")
    assert done.returncode == 0 and done.stdout.startswith("elr (pytest-elr) "), done
    assert done.stdout.split()[-1][0].isdigit(), done.stdout  # the installed distribution's version
    typo = elr("serch")
    assert typo.returncode == 2 and "unknown command: serch (did you mean 'search'?)" in typo.stderr
    grouped = elr("bench", "modle")
    assert grouped.returncode == 2 and "(did you mean 'model'?)" in grouped.stderr


def test_a_command_whose_extra_is_missing_says_which_to_install() -> None:
    """``elr check`` needs pyspark: without it, two lines and exit 2, not a traceback."""
    code = ("import sys; sys.modules['pyspark'] = None  # as if not installed\n"
            "from pytest_elr.cli import main; sys.exit(main(['check', '--help']))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done
    assert done.stderr.splitlines() == ["elr check: needs pyspark, which is not installed.",
                                        "fix: pip install 'pytest-elr[spark]'"]
