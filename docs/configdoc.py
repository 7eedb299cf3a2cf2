"""Render the flag reference of docs/configuration.md from the CLI's own parsers.

    python docs/configdoc.py docs/configuration.md           (``make generate`` runs it)
    python docs/configdoc.py --check docs/configuration.md   (exit 1 when stale)

Rewrites only the part of the file between ``<!-- BEGIN GENERATED: flags -->`` and
``<!-- END GENERATED: flags -->``: per subcommand a table of every long flag, the environment variable
that mirrors it (``tritonwatch.flags.env_defaults``), its default and its help; for ``sidecar`` also the
config file field (``tritonwatch.exporters.config.SidecarConfig``), whose defaults are the real ones (the sidecar's
flags default to "not given" so that a config file value is not shadowed).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import fields
from pathlib import Path

from tritonwatch.errors import UsageError

BEGIN = "<!-- BEGIN GENERATED: flags -->"
END = "<!-- END GENERATED: flags -->"
ENV_PREFIX = "TRITONWATCH_"
_ENV_SUFFIX = re.compile(r"\s*\[env [A-Z0-9_]+\]$")
# A flag whose default is "not given" (None) and applied later says its effective default in its help.
_HELP_DEFAULT = re.compile(r"\(default:? ([^;),]+)")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _default(value: object, action: argparse.Action | None = None) -> str:
    if value is None and action is not None:
        m = _HELP_DEFAULT.search(action.help or "")
        return f"`{m.group(1).strip()}`" if m and m.group(1).strip()[:1].isdigit() else ""
    if value is None or value == "" or value is False:
        return ""
    return f"`{value}`"


def _help(action: argparse.Action) -> str:
    text = _ENV_SUFFIX.sub("", action.help or "").replace("%%", "%")
    return _cell(text)


def _flag(action: argparse.Action) -> str:
    long = [o for o in action.option_strings if o.startswith("--")]
    name = long[0] if long else action.option_strings[0]
    if action.nargs == 0:
        return f"`{name}`"
    return f"`{name} {action.metavar or action.dest.upper()}`"


def _sidecar_table(parser: argparse.ArgumentParser) -> list[str]:
    from tritonwatch.exporters.config import SidecarConfig

    defaults = SidecarConfig()
    known = {f.name for f in fields(SidecarConfig)}
    rows = [
        "| flag | environment | config file field | default | meaning |",
        "|---|---|---|---|---|",
    ]
    for action in parser._actions:
        if not action.option_strings or action.dest == "help":
            continue
        field = action.dest if action.dest in known else ""
        default = _default(getattr(defaults, field)) if field else _default(action.default)
        rows.append(
            f"| {_flag(action)} | `{ENV_PREFIX}{action.dest.upper()}` | {f'`{field}`' if field else ''} "
            f"| {default} | {_help(action)} |"
        )
    return rows


def _table(parser: argparse.ArgumentParser) -> list[str]:
    rows = ["| flag | environment | default | meaning |", "|---|---|---|---|"]
    for action in parser._actions:
        if not action.option_strings or action.dest == "help":
            continue
        rows.append(
            f"| {_flag(action)} | `{ENV_PREFIX}{action.dest.upper()}` | {_default(action.default, action)} | {_help(action)} |"
        )
    return rows


def _flatten(parsers: dict[str, argparse.ArgumentParser]) -> dict[str, argparse.ArgumentParser]:
    """Nested commands (``alerts status``, ``alerts silence``) in place of the command that holds them."""
    out: dict[str, argparse.ArgumentParser] = {}
    for name, parser in parsers.items():
        nested = _subparsers(parser)
        out.update({f"{name} {sub}": p for sub, p in nested.items()} if nested else {name: parser})
    return out


def render() -> str:
    """The generated section (without the markers), one table per subcommand in CLI order."""
    from tritonwatch.cli import build_parser

    # The parsers take their defaults from TRITONWATCH_* variables: document the built-in ones.
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith(ENV_PREFIX)}
    try:
        parsers = _subparsers(build_parser())
    finally:
        os.environ.update(saved)
    out: list[str] = []
    for name, parser in _flatten(parsers).items():
        out += [f"### `tritonwatch {name}`", ""]
        if parser.description:
            out += [_cell(parser.description[:1].upper() + parser.description[1:]), ""]
        has_flags = any(a.option_strings and a.dest != "help" for a in parser._actions)
        if not has_flags:
            out += ["No flags.", ""]
            continue
        out += [*(_sidecar_table(parser) if name == "sidecar" else _table(parser)), ""]
    return "\n".join(out)


def update(text: str) -> str:
    """``text`` with its generated section replaced by a fresh ``render()``."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise UsageError(f"the file has no {BEGIN} ... {END} section")
    return text[: start + len(BEGIN)] + "\n" + render() + "\n" + text[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python docs/configdoc.py", description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="the Markdown file to update (docs/configuration.md)")
    parser.add_argument("--check", action="store_true", help="only check: exit 1 when the file is stale")
    args = parser.parse_args(argv)
    try:
        text = args.path.read_text()
        fresh = update(text)
    except OSError as exc:
        print(f"error: {args.path}: {exc.strerror}", file=sys.stderr)
        return 2
    except UsageError as exc:
        print(f"error: {args.path}: {exc}", file=sys.stderr)
        return 2
    if args.check:
        if fresh != text:
            print(f"{args.path} is stale: run python docs/configdoc.py {args.path}", file=sys.stderr)
            return 1
        return 0
    if fresh != text:
        args.path.write_text(fresh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
