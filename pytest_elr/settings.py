"""The plugin's settings: every ``--elr-*`` option is also an ini key and (some) an environment
variable. The command line wins over the environment, the environment over the ini file, the ini
file over the default -- the order Tavern and pytest-xdist users expect.

A repo pins its choices in ``pyproject.toml`` (``[tool.pytest.ini_options] elr_backend = "model"``)
or ``pytest.ini``; paths in an ini file are relative to that file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_elr.core.reader import did_you_mean
from pytest_elr.model.profiles import PROFILE_NAMES


@dataclass(frozen=True)
class Setting:
    name: str  # ``backend`` -> ``--elr-backend``, ini ``elr_backend``
    help: str
    default: str | None = None
    env: str | None = None
    choices: tuple[str, ...] | None = None
    path: bool = False

    @property
    def option(self) -> str:
        return "--elr-" + self.name.replace("_", "-")

    @property
    def ini(self) -> str:
        return "elr_" + self.name


SETTINGS: tuple[Setting, ...] = (
    Setting("backend", "where scenarios run: kafka (real cluster in containers) or model (the in-process "
            "oracle, milliseconds), or a backend another package registers", "kafka", env="PYTEST_ELR_BACKEND"),
    Setting("profile", "run only this behaviour profile (default: every profile a scenario declares that the "
            "backend supports)", choices=PROFILE_NAMES),
    Setting("history_dir", "write each run's history (JSON Lines) under this directory (default: a temporary "
            "directory)", path=True),
    Setting("checker", "who judges each run's history: spark (the PySpark job; falls back to inline, saying so, "
            "when pyspark is not installed) or inline (acknowledged-but-unread records, in process)", "spark",
            choices=("spark", "inline")),
    Setting("report", "write one offline HTML report (verdicts and a timeline per run) to this file", path=True),
    Setting("kafka_version", "Kafka release for the kafka backend (default: the newest built and tested)",
            env="PYTEST_ELR_KAFKA_VERSION"),
    Setting("kafka_dist", "a Kafka distribution of your own for the kafka backend: a release tarball such as "
            "./gradlew releaseTarGz makes, or a directory with libs/; its node image is built from it (once per "
            "content) and its version is the release under test", env="PYTEST_ELR_KAFKA_DIST", path=True),
    Setting("progress", "print each step as it runs (label, actions, the state it settles in, time): auto (with "
            "-v, not under xdist), on or off (true/false, yes/no, 1/0 too)", "auto", choices=("auto", "on", "off")),
    Setting("parallel", "clusters at once: runs go to this many pytest-xdist workers, each with its own clusters; "
            "auto sizes it from the machine's cores and memory and the number of scenario files (kafka backend "
            "only); 1 runs one at a time; -n on the command line wins", "auto", env="PYTEST_ELR_PARALLEL"),
)
BY_NAME = {s.name: s for s in SETTINGS}
#: the spellings of a boolean an ini file or a CI variable may use, for settings whose choices are on/off
BOOLEAN_WORDS = {"true": "on", "yes": "on", "1": "on", "false": "off", "no": "off", "0": "off"}



def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("elr", "pytest-elr: chaos tests of Kafka's replication protocol")
    for s in SETTINGS:
        extra = f" [ini {s.ini}" + (f", env {s.env}" if s.env else "") + (f"; default {s.default}" if s.default else "")
        group.addoption(s.option, dest=s.ini, default=None, help=s.help + extra + "]")
        parser.addini(s.ini, s.help, default=None)


def setting(config: pytest.Config, name: str) -> str | None:
    """The value of a setting: command line, then environment, then ini file, then default."""
    return _lookup(config, name)[0]


def setting_source(config: pytest.Config, name: str) -> str:
    """Where the setting's value comes from, as an error message names it: ``--elr-backend``,
    ``$PYTEST_ELR_BACKEND`` or ``<ini file>: elr_backend``."""
    return _lookup(config, name)[1]


def _lookup(config: pytest.Config, name: str) -> tuple[str | None, str]:
    s = BY_NAME[name]
    value = config.getoption(s.ini)
    where = s.option
    if value is None and s.env:
        value = os.environ.get(s.env) or None
        where = f"${s.env}"
    from_ini = False
    if value is None:
        ini = config.getini(s.ini)
        if ini:
            value, from_ini = str(ini).strip(), True
            where = f"{config.inipath or 'the ini file'}: {s.ini}"
    if value is None:
        return s.default, "the default"
    if s.choices is not None and {"on", "off"} <= set(s.choices):
        value = BOOLEAN_WORDS.get(value.lower(), value)
    if s.choices is not None and value not in s.choices:
        raise pytest.UsageError(f"{where}: expected one of {', '.join(s.choices)}, got {value!r}"
                                + did_you_mean(value, s.choices))
    if s.path and from_ini and config.inipath is not None:
        value = str(config.inipath.parent / value)
    return value, where


def path_setting(config: pytest.Config, name: str) -> Path | None:
    value = setting(config, name)
    return Path(value) if value else None
