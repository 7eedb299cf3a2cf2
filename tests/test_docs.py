"""The deployment docs cannot drift: docs/configuration.md's flag tables are regenerated from the CLI's
parsers and compared, the precedence and the config file example it documents are exercised on the real
sidecar configuration code, and every repository path docs/deploy.md and docs/upgrading.md name exists."""

from __future__ import annotations

import os
import re
from dataclasses import fields
from pathlib import Path

import pytest
import yaml
from support.scripts import load_script

from tritonwatch.cli import build_parser
from tritonwatch.errors import UsageError
from tritonwatch.exporters.config import SidecarConfig, resolve

configdoc = load_script("docs/configdoc.py")

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "configuration.md"


def test_flag_tables_are_up_to_date(capsys: pytest.CaptureFixture[str]) -> None:
    code = configdoc.main(["--check", str(DOC)])
    assert code == 0, capsys.readouterr().err + " (run `python docs/configdoc.py docs/configuration.md`)"


def test_every_sidecar_setting_is_documented() -> None:
    text = DOC.read_text()
    section = text[text.index(configdoc.BEGIN) : text.index(configdoc.END)]
    for f in fields(SidecarConfig):
        flag = "--" + f.name.replace("_", "-")
        row = next((ln for ln in section.splitlines() if ln.startswith(f"| `{flag} ")), None)
        assert row is not None, f"{flag} missing from the sidecar table"
        assert f"`TRITONWATCH_{f.name.upper()}`" in row and f"`{f.name}`" in row


def test_the_section_markers_are_required(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="GENERATED"):
        configdoc.update("# no markers\n")
    bad = tmp_path / "bad.md"
    bad.write_text("nothing to update\n")
    assert configdoc.main([str(bad)]) == 2


def _sidecar(argv: list[str]) -> SidecarConfig:
    return resolve(build_parser().parse_args(["sidecar", *argv]))


def test_documented_precedence_flag_env_file_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [k for k in os.environ if k.startswith("TRITONWATCH_")]:
        monkeypatch.delenv(key)
    config = tmp_path / "sidecar.yaml"
    config.write_text("interval: 7\nwindow: 70\nlisten: 127.0.0.1:9999\n")
    assert _sidecar([]).interval == SidecarConfig().interval
    assert _sidecar(["--config", str(config)]).interval == 7
    monkeypatch.setenv("TRITONWATCH_INTERVAL", "3")
    cfg = _sidecar(["--config", str(config)])
    assert (cfg.interval, cfg.window, cfg.listen) == (3, 70, "127.0.0.1:9999")
    assert _sidecar(["--config", str(config), "--interval", "2"]).interval == 2
    monkeypatch.setenv("TRITONWATCH_CONFIG", str(config))
    assert _sidecar([]).window == 70
    # An empty variable counts as set (the doc says so): it overrides the file.
    config.write_text("probe: fraud_detector\n")
    assert _sidecar([]).probe == "fraud_detector"
    monkeypatch.setenv("TRITONWATCH_PROBE", "")
    assert _sidecar([]).probe == ""


def test_config_file_example_is_valid(tmp_path: Path) -> None:
    text = DOC.read_text()
    (example,) = re.findall(r"```yaml\n(# /etc/tritonwatch/sidecar.yaml\n.*?)```", text, re.S)
    data = yaml.safe_load(example)
    web = tmp_path / "web.yaml"
    web.write_text("basic_auth_users: {}\n")
    data["web_config"] = str(web)  # the example's path exists on a deployed host, not here
    path = tmp_path / "sidecar.yaml"
    path.write_text(yaml.safe_dump(data))
    cfg = resolve(build_parser().parse_args(["sidecar", "--config", str(path)]))
    assert cfg.otlp_listen == "127.0.0.1:4318" and cfg.quantile_window == 300
    assert cfg.probe_models == ("fraud_detector", "text_encoder")
    path.write_text("intervall: 5\n")
    with pytest.raises(UsageError, match="unknown field 'intervall'"):
        resolve(build_parser().parse_args(["sidecar", "--config", str(path)]))


_REPO_PATH = re.compile(r"`((?:compose|deploy|alerts|dashboards|docs|tritonwatch|exporters|tests)/[^`\s]*)`")


@pytest.mark.parametrize(
    "doc", ["deploy.md", "upgrading.md", "configuration.md", "compatibility.md", "dashboards.md"]
)
def test_paths_named_in_the_docs_exist(doc: str) -> None:
    text = (ROOT / "docs" / doc).read_text()
    paths = sorted(set(_REPO_PATH.findall(text)))
    assert paths, f"{doc} names no repository path"
    for raw in paths:
        path = raw.split(" ")[0].rstrip(".,:")
        if "*" in path:
            assert sorted(ROOT.glob(path)), f"{doc}: {raw} matches nothing"
        else:
            assert (ROOT / path).exists(), f"{doc}: {raw} does not exist"


def test_the_dashboards_table_lists_every_dashboard_with_its_uid() -> None:
    """docs/dashboards.md once listed four dashboards of five: the table must follow the generator."""
    pytest.importorskip("grafanalib")
    import json

    from tritonwatch.dashboards.generate import builders

    text = (ROOT / "docs" / "dashboards.md").read_text()
    rows = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^\| `(tritonwatch-\w+\.json)` \| `(tw-[0-9a-f]+)` \|", text, re.M)
    }
    committed = {
        p.name: json.loads(p.read_text())["uid"] for p in (ROOT / "dashboards" / "generated").glob("*.json")
    }
    assert rows == committed
    assert set(rows) == set(builders())
    assert (
        f"## The {['no', 'one', 'two', 'three', 'four', 'five', 'six', 'seven'][len(rows)]} dashboards"
        in text
    )
