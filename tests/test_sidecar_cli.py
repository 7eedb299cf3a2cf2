"""The sidecar's command line: bad values are one line naming the flag, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tritonwatch.cli import main


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["sidecar", "--triton", "not-a-url"], "--triton"),
        (["sidecar", "--triton-metrics", "ftp://x/metrics"], "--triton-metrics"),
        (["sidecar", "--listen", "nowhere"], "--listen"),
        (["sidecar", "--interval", "0"], "--interval"),
        (["sidecar", "--interval", "abc"], "--interval"),
        (["sidecar", "--interval", "5", "--window", "6"], "--window"),
        (["sidecar", "--quantile-samples", "0"], "--quantile-samples"),
        (["sidecar", "--quantile-samples", "65537"], "--quantile-samples: at most 65536"),
        (["sidecar", "--config", "/nonexistent.yaml"], "--config"),
        (["sidecar", "--web-config", "/nonexistent.yaml"], "--web-config"),
    ],
)
def test_bad_values_name_the_flag(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert needle in err


def test_unknown_config_field_names_file_and_field(
    tmp_path: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "sidecar.yaml"  # type: ignore[operator]
    cfg.write_text("triton: http://127.0.0.1:8000\nintervall: 3\n")
    assert main(["sidecar", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "intervall" in err and str(cfg) in err


def test_environment_mirrors_flags(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITONWATCH_TRITON", "bogus")
    assert main(["sidecar"]) == 2
    assert "--triton" in capsys.readouterr().err


def test_console_script_exits_nonzero_with_one_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tritonwatch", "sidecar", "--triton", "not-a-url"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert proc.stderr.strip().count("\n") == 0 and "--triton" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    from tritonwatch.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name in sub.choices:  # type: ignore[union-attr]
        assert main([name, "--help"]) == 0
        assert "usage:" in capsys.readouterr().out
