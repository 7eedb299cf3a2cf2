"""Every long flag mirrored by an environment variable (``--otlp-listen`` <- ``TRITONWATCH_OTLP_LISTEN``).

Core, so that a subcommand that builds nested parsers of its own (``tritonwatch alerts status``) mirrors
its flags the same way without importing the CLI that imports it.
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Sequence
from datetime import datetime, timezone

from tritonwatch.errors import UsageError

_ON = ("1", "true", "yes", "on")
_OFF = ("", "0", "false", "no", "off")  # "" (set but empty) is off, as unset is


def show_default(action: argparse.Action) -> None:
    """Help texts in one style, each with its default: a help that does not state its default in words
    ("(default: <triton host>:8002/metrics)", "off unless given") ends with the flag's own default,
    ``(default: X)``, as argparse's ArgumentDefaultsHelpFormatter writes it (which would repeat the
    ones stated in words). Switches, required flags and flags without a default state none."""
    default = action.default
    if not action.help or action.help is argparse.SUPPRESS or "default" in action.help or action.required:
        return
    if action.nargs == 0 or default is None or default == "" or default is argparse.SUPPRESS:
        return
    shown = f"{default:g}" if isinstance(default, float) else str(default)
    action.help += f" (default: {shown.replace('%', '%%')})"


def env_defaults(parser: argparse.ArgumentParser, prefix: str = "TRITONWATCH_") -> None:
    """Mirror every long flag by an environment variable: ``--otlp-listen`` <- ``TRITONWATCH_OTLP_LISTEN``;
    each flag's help shows its default (``show_default``) and its variable."""
    for action in parser._actions:
        if not action.option_strings or action.dest in ("help",):
            continue
        show_default(action)
        env = prefix + action.dest.upper()
        if env in os.environ:
            raw = os.environ[env]
            action.required = False  # the variable gives it: argparse checks only the command line
            if action.nargs == 0:  # store_true flags
                word = raw.strip().lower()
                if word not in _ON + _OFF:
                    # A typo must not silently leave a switch off.
                    flag = max(action.option_strings, key=len)
                    raise UsageError(f"{env} (for {flag}): {raw!r} is not one of {', '.join(_ON + _OFF[1:])}")
                action.default = word in _ON
            elif callable(action.type):
                try:
                    action.default = action.type(raw)
                except (TypeError, ValueError):
                    flag = max(action.option_strings, key=len)
                    raise UsageError(f"{env} (for {flag}): {raw!r} is not a valid value") from None
            else:
                action.default = raw
        if action.help and action.help is not argparse.SUPPRESS:
            action.help += f" [env {env}]"


def command_line(
    argv: Sequence[str], parser: argparse.ArgumentParser | None = None, prefix: str = "TRITONWATCH_"
) -> str:
    """The command as it was run, for a generated file's "Regenerate:" line: ``tritonwatch`` and its
    arguments as given (paths as typed, not made absolute, so that ``make generate``'s fixed commands
    write the same bytes anywhere), shell-quoted. A flag of ``parser`` that came from its environment
    variable (``env_defaults``) leads as an assignment: the line alone reproduces the run."""
    given = {arg.split("=", 1)[0] for arg in argv if arg.startswith("--")}
    assignments = []
    for action in parser._actions if parser else ():
        env = prefix + action.dest.upper()
        if action.option_strings and env in os.environ and not given.intersection(action.option_strings):
            assignments.append(f"{env}={shlex.quote(os.environ[env])}")
    return " ".join([*assignments, shlex.join(["tritonwatch", *argv])])


def utc_time(text: str, flag: str) -> datetime:
    """An ISO-8601 time given to ``flag``, in UTC (a time without a zone is read as UTC)."""
    try:
        t = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"{flag}: not an ISO-8601 time (got {text!r:.60}; e.g. 2026-11-09T00:00:00Z)"
        ) from None
    return t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)
