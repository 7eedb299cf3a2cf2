"""The ``tritonwatch`` command: one entry point, one module per subcommand.

Each subcommand module exposes ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int`` and keeps
heavy imports (pandas, grafanalib, tritonclient) inside ``run`` so that ``tritonwatch sidecar``
starts fast.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import math
import sys
from collections.abc import Sequence

from tritonwatch.errors import TritonwatchError, UsageError
from tritonwatch.flags import command_line, env_defaults

COMMANDS: dict[str, str] = {
    "sidecar": "tritonwatch.exporters.sidecar",
    "local-triton": "tritonwatch.local.triton",
    "load": "tritonwatch.local.load",
    "demo": "tritonwatch.local.demo",
    "init": "tritonwatch.cli.init",
    "rules": "tritonwatch.alerts.generate",
    "alerts": "tritonwatch.cli.alerts",
    "dashboards": "tritonwatch.dashboards.generate",
    "report": "tritonwatch.reports.report",
    "advise": "tritonwatch.advise.command",
    "k8s": "tritonwatch.deploy.k8s",
}


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so errors stay one line and main() stays testable."""

    def error(self, message: str) -> None:  # type: ignore[override]
        exc = UsageError(message)
        exc.prog = self.prog  # type: ignore[attr-defined]
        raise exc


def _fail(prog: str, exc: TritonwatchError) -> int:
    """Usage and runtime errors alike: ``tritonwatch COMMAND: error: REASON``, one line, argparse's order."""
    print(f"{getattr(exc, 'prog', prog)}: error: {exc}", file=sys.stderr)
    return exc.exit_code


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tritonwatch")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tritonwatch", description="Observability and SLOs for NVIDIA Triton.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action="version", version=f"tritonwatch {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, module_name in COMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                continue  # that part of the product is not installed in this build
            raise
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        env_defaults(p)
        p.set_defaults(_run=module.run, _parser=p)
    return parser


def _check_finite(args: argparse.Namespace) -> None:
    """Every float flag of every command is a finite number: 'nan' and 'inf' parse as floats."""
    parser = getattr(args, "_parser", None)
    for action in parser._actions if parser else ():
        value = getattr(args, action.dest, None)
        if action.type is float and isinstance(value, float) and not math.isfinite(value):
            flag = max(action.option_strings, key=len)
            raise UsageError(f"{flag}: must be a finite number (got {value})")


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser()
        args = parser.parse_args(args_list)
    except UsageError as exc:
        return _fail("tritonwatch", exc)
    except SystemExit as exc:  # --help, --version
        return int(exc.code or 0)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    prog = f"tritonwatch {args.command}" if args.command else "tritonwatch"
    # What a generated file's "Regenerate:" line shows: this command, as typed.
    args.command_line = command_line(args_list, getattr(args, "_parser", None))
    try:
        _check_finite(args)
    except UsageError as exc:
        return _fail(prog, exc)
    if not getattr(args, "_run", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args._run(args))
    except TritonwatchError as exc:
        return _fail(prog, exc)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
