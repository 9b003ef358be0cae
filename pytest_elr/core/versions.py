"""Kafka releases: which exist, named sets of them, and version ranges a scenario can name.

A setting (``--elr-kafka-version``, ini ``elr_kafka_version``) takes one release (``4.1.2``), a
comma list (``4.0.2,4.4.0``) or a named set (``all-4x``, ``ci``, ``newest``). A release not listed
here is accepted when it is well formed and a 4.x release: the image build then fetches it from
Maven Central and says so when it is not there (the product is run on releases newer than itself).

A scenario names ranges with PEP 440 specifiers (``">=4.1.0"``, ``">=4.0.0,<4.2.0"``), read with
``packaging``, which pytest itself depends on.
"""

from __future__ import annotations

import re

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

#: every Kafka 4.x release Maven Central serves (checked 2026-11-23), oldest first
KNOWN_KAFKA_VERSIONS: tuple[str, ...] = (
    "4.0.0", "4.0.1", "4.0.2", "4.1.0", "4.1.1", "4.1.2", "4.2.0", "4.2.1", "4.2.2", "4.3.0", "4.3.1", "4.4.0",
)
NEWEST = KNOWN_KAFKA_VERSIONS[-1]
#: named sets, for matrices: what CI runs is the newest release and the last 4.0.x
VERSION_SETS: dict[str, tuple[str, ...]] = {
    "all-4x": KNOWN_KAFKA_VERSIONS,
    "ci": (NEWEST, "4.0.2"),
    "newest": (NEWEST,),
}
#: a version list longer than this is refused (every release costs an image and a cluster)
MAX_VERSIONS = 32
_RELEASE = re.compile(r"4\.\d{1,3}\.\d{1,3}")


class VersionError(ValueError):
    """A version setting or range that cannot be read; the message says what was expected."""


def resolve_versions(spec: str) -> tuple[str, ...]:
    """The releases a setting names, in the order given, each once."""
    out: list[str] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            raise VersionError(f"empty entry in {spec!r}: expected releases or sets separated by commas")
        if part in VERSION_SETS:
            out += VERSION_SETS[part]
        elif _RELEASE.fullmatch(part):
            out.append(part)
        else:
            raise VersionError(f"{part!r} is not a Kafka 4.x release (e.g. {NEWEST}) nor a set "
                               f"({', '.join(VERSION_SETS)}); known releases: {', '.join(KNOWN_KAFKA_VERSIONS)}")
    unique = tuple(dict.fromkeys(out))
    if len(unique) > MAX_VERSIONS:
        raise VersionError(f"{len(unique)} releases named: at most {MAX_VERSIONS}")
    return unique


def version_range(text: str) -> SpecifierSet:
    """A range such as ``">=4.1.0"`` or ``">=4.0.0,<4.2.0"`` (PEP 440 specifiers)."""
    try:
        spec = SpecifierSet(text)
    except InvalidSpecifier:
        raise VersionError(f"{text!r} is not a version range: expected e.g. '>=4.1.0' or '>=4.0.0,<4.2.0'") from None
    if not str(spec):
        raise VersionError("empty version range: expected e.g. '>=4.1.0'")
    return spec


def in_range(version: str, spec: SpecifierSet) -> bool:
    return spec.contains(Version(version))
