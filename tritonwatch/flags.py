"""Every long flag mirrored by an environment variable (``--otlp-listen`` <- ``TRITONWATCH_OTLP_LISTEN``).

Core, so that a subcommand that builds nested parsers of its own (``tritonwatch alerts status``) mirrors
its flags the same way without importing the CLI that imports it.
"""

from __future__ import annotations

import argparse
import os
from datetime import datetime, timezone

from tritonwatch.errors import UsageError

_ON = ("1", "true", "yes", "on")
_OFF = ("", "0", "false", "no", "off")  # "" (set but empty) is off, as unset is


def env_defaults(parser: argparse.ArgumentParser, prefix: str = "TRITONWATCH_") -> None:
    """Mirror every long flag by an environment variable: ``--otlp-listen`` <- ``TRITONWATCH_OTLP_LISTEN``."""
    for action in parser._actions:
        if not action.option_strings or action.dest in ("help",):
            continue
        env = prefix + action.dest.upper()
        if env in os.environ:
            raw = os.environ[env]
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


def utc_time(text: str, flag: str) -> datetime:
    """An ISO-8601 time given to ``flag``, in UTC (a time without a zone is read as UTC)."""
    try:
        t = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"{flag}: not an ISO-8601 time (got {text!r:.60}; e.g. 2026-11-09T00:00:00Z)"
        ) from None
    return t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)
