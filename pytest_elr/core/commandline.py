"""The parser every ``elr <command>`` builds: its usage line says ``elr <command>``, and its help is
plain text -- the module docstrings it is made of are written for Sphinx-style readers (````x````,
``:data:`...```), which a terminal would show raw."""

from __future__ import annotations

import argparse
import re
from typing import Any

from pytest_elr.core.reader import did_you_mean

_ROLE = re.compile(r":[a-z]+:`~?\.?([^`]+)`")  # :data:`pkg.mod.NAME`, :func:`~.mod.fn`
_LITERAL = re.compile(r"``(.+?)``|`([^`\n]+)`")


def plain(text: str | None) -> str | None:
    """``text`` without reStructuredText markup: roles become their target (``~`` keeps its last
    part, as Sphinx shows it), literals lose their backquotes."""
    if text is None:
        return None

    def role(m: re.Match[str]) -> str:
        target = m.group(1)
        return target.rsplit(".", 1)[-1] if m.group(0).split("`")[1].startswith("~") else target

    return _LITERAL.sub(lambda m: m.group(1) or m.group(2), _ROLE.sub(role, text))


class PlainHelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The description keeps its line breaks (as ``RawDescriptionHelpFormatter``); option help is
    wrapped as usual; both without markup."""

    def _format_text(self, text: str) -> str:
        return super()._format_text(plain(text) or "")

    def _expand_help(self, action: argparse.Action) -> str:
        return plain(super()._expand_help(action)) or ""


class CommandParser(argparse.ArgumentParser):
    """An option value that is not one of its choices gets a "did you mean", as YAML keys and the
    plugin's ``--elr-*`` values do (argparse only has that from Python 3.14, for subcommands)."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as exc:
            if not isinstance(value, str) or action.choices is None:
                raise
            hint = did_you_mean(value, [str(c) for c in action.choices])
            raise argparse.ArgumentError(action, exc.message + hint) from None


def command_parser(command: str, description: str | None = None, **kwargs: Any) -> argparse.ArgumentParser:
    """The parser of ``elr <command>`` (``command`` as typed: ``"bench model"``)."""
    kwargs.pop("formatter_class", None)
    return CommandParser(prog=f"elr {command}", description=description, formatter_class=PlainHelpFormatter,
                         **kwargs)
