"""The command line as a whole: ``--version``, one error format for usage and runtime errors, and
environment variables that mean one thing each."""

from __future__ import annotations

import argparse
import os
import re
from importlib.metadata import version
from pathlib import Path

import pytest

from tritonwatch.cli import build_parser, main


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"tritonwatch {version('tritonwatch')}\n"


@pytest.mark.parametrize(
    ("argv", "code", "line"),
    [
        # usage errors (argparse's) and errors found at run time read the same way
        (["rules"], 2, "tritonwatch rules: error: the following arguments are required: --slo, --out"),
        # --slo: rules and k8s require it; the demo requires it for models of your own
        (["rules", "--out", "x"], 2, "tritonwatch rules: error: the following arguments are required: --slo"),
        (["k8s"], 2, "tritonwatch k8s: error: the following arguments are required: --slo"),
        (
            ["demo", "--model-repository", "."],
            2,
            "tritonwatch demo: error: --slo FILE is required with --model-repository: the SLO file for those models",
        ),
        (
            ["rules", "--slo", "/nonexistent.yaml", "--out", "x"],
            2,
            "tritonwatch rules: error: /nonexistent.yaml: cannot read SLO file (No such file or directory)",
        ),
        (["report", "--days", "x"], 2, "tritonwatch report: error: argument --days: invalid int value: 'x'"),
        # every missing flag in one run
        (
            ["report"],
            2,
            "tritonwatch report: error: the following arguments are required: --prometheus URL, "
            "--out DIR or --archive DIR (or their TRITONWATCH_* variables)",
        ),
        (
            ["load", "--triton", "http://127.0.0.1:1", "--duration", "nan"],
            2,
            "tritonwatch load: error: --duration: must be a finite number (got nan)",
        ),
        (["nosuch"], 2, "tritonwatch: error: argument COMMAND: invalid choice: 'nosuch'"),
        (
            ["alerts", "status", "--alertmanager", "http://127.0.0.1:1"],
            1,
            "tritonwatch alerts: error: cannot reach Alertmanager at http://127.0.0.1:1",
        ),
    ],
)
def test_one_error_format(
    argv: list[str],
    code: int,
    line: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == code
    err = capsys.readouterr().err
    assert err.startswith(line) and err.count("\n") == 1, err


def _env_names(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, list[tuple[str, str]]]:
    """TRITONWATCH_* variable -> [(command, flag)], nested commands included."""
    out: dict[str, list[tuple[str, str]]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                for env, uses in _env_names(sub, f"{prefix}{name} ").items():
                    out.setdefault(env, []).extend(uses)
        elif action.help and (m := re.search(r"\[env (TRITONWATCH_\w+)\]", action.help)):
            out.setdefault(m.group(1), []).append((prefix.strip(), max(action.option_strings, key=len)))
    return out


def test_a_variable_shared_by_commands_is_the_same_flag_in_each() -> None:
    """TRITONWATCH_DURATION was read by `silence --for` (2h) and by `load`/`demo --duration` (seconds)."""
    names = _env_names(build_parser())
    assert names["TRITONWATCH_DURATION"] == [("load", "--duration"), ("demo", "--duration")]
    assert names["TRITONWATCH_SILENCE_FOR"] == [("alerts silence", "--for")]
    assert names["TRITONWATCH_SLO_OUT"] == [("init", "--out")]
    for env, uses in names.items():
        assert len({flag for _, flag in uses}) == 1, (env, uses)


def test_silence_for_ignores_the_load_duration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITONWATCH_DURATION", "30")
    args = build_parser().parse_args(["alerts", "silence", "--model", "m", "--comment", "c"])
    assert args.silence_for == "2h"
    monkeypatch.setenv("TRITONWATCH_SILENCE_FOR", "30m")
    args = build_parser().parse_args(["alerts", "silence", "--model", "m", "--comment", "c"])
    assert args.silence_for == "30m"


def _parsers(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every command's parser, nested ones (``alerts status``) included."""
    out: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out[f"{prefix}{name}"] = sub
                out.update(_parsers(sub, f"{prefix}{name} "))
    return out


def test_every_help_shows_its_defaults_in_one_style(monkeypatch: pytest.MonkeyPatch) -> None:
    """One style, argparse's ``(default: X)``: a flag with a default of its own shows it, a default
    stated in words reads the same way; descriptions start in lower case and end without a period."""
    for name in [n for n in os.environ if n.startswith("TRITONWATCH_")]:
        monkeypatch.delenv(name)  # a variable would be shown as the default
    parsers = _parsers(build_parser())
    assert len(parsers) == 13
    for command, parser in parsers.items():
        if parser.description:
            assert parser.description[0].islower() and not parser.description.endswith("."), command
        text = " ".join(parser.format_help().split())
        assert not re.search(r"\(default(?!: )|default is|defaults to", text), command
        for action in parser._actions:
            flag = max(action.option_strings, key=len, default="")
            literal = action.default not in (None, "", False, argparse.SUPPRESS) and action.nargs != 0
            if flag and literal and not action.required and action.help is not argparse.SUPPRESS:
                assert "(default: " in str(action.help), f"{command} {flag}"
    shown = {
        ("load", "--triton"): "(default: http://127.0.0.1:8000)",
        ("report", "--timeout"): "(default: 120)",
        ("k8s", "--out"): "(default: deploy/kubernetes/generated)",
        ("demo", "--duration"): "(default: 0)",
        ("sidecar", "--max-models"): "(default: 5000)",
    }
    for (command, flag), default in shown.items():
        (action,) = [a for a in parsers[command]._actions if flag in a.option_strings]
        assert default in str(action.help), (command, flag)


def test_required_flags_show_as_required() -> None:
    """``--slo``: required by rules and k8s, shown without brackets in their usage."""
    parsers = _parsers(build_parser())
    for command in ("rules", "k8s"):
        usage = " ".join(parsers[command].format_usage().split())
        assert " --slo FILE " in usage and "[--slo FILE]" not in usage, usage


def test_a_variable_makes_a_required_flag_optional(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITONWATCH_SLO", "given.yaml")
    args = build_parser().parse_args(["rules", "--out", "x"])
    assert args.slo == "given.yaml"


def test_the_demo_names_the_bundled_slo_file_it_falls_back_on(capsys: pytest.CaptureFixture[str]) -> None:
    from tritonwatch.local.bundled import demo_slo, package_path

    own = package_path("tritonwatch.local", "demo_slo.yaml")
    assert demo_slo("mine.yaml", "my-models") == "mine.yaml"
    assert capsys.readouterr().err == ""
    assert demo_slo(None, None) == str(own)
    assert capsys.readouterr().err == f"tritonwatch demo: no --slo given: the demo's own SLO file {own}\n"
    assert "fraud_pipeline" in own.read_text()
