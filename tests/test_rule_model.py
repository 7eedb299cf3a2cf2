"""The typed rules (``alerts/model.py``) and their writers: the rule files (``alerts/rulefiles.py``), the
promtool test files (one per objective), the PrometheusRules (``deploy/manifests.py``) and the
AlertmanagerConfig (``deploy/amconfig.py``) read tags and typed matchers, never the text they wrote."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest
import yaml
from support import stacks

from tritonwatch import slo
from tritonwatch.alerts import alertmanager, generate, layers, promtestfiles, rulefiles
from tritonwatch.alerts.model import CATALOG, OPERATIONAL, SLO, Alert, Group, Record
from tritonwatch.deploy import amconfig, manifests

ROOT = Path(__file__).resolve().parent.parent
SLO_FILE = ROOT / "alerts" / "slo.yaml"

UP = Alert("Up", "up == 0", (("severity", "page"),), (("summary", "down"),), hold="5m")
RATE = Record("model:x:rate5m", "sum by (model) (rate(x[5m]))")


def test_rules_write_as_the_rule_files_hold_them() -> None:
    labelled = Record("slo:objective:ratio", "vector(0.99)", (("model", "m"), ("slo", "m-latency")))
    assert labelled.to_yaml() == {
        "record": "slo:objective:ratio",
        "expr": "vector(0.99)",
        "labels": {"model": "m", "slo": "m-latency"},  # in the order built
    }
    assert RATE.to_yaml() == {"record": "model:x:rate5m", "expr": "sum by (model) (rate(x[5m]))"}
    linked = UP.annotated(runbook_url="https://r/Up.md")
    assert linked.to_yaml() == {
        "alert": "Up",
        "expr": "up == 0",
        "for": "5m",
        "labels": {"severity": "page"},
        "annotations": {"summary": "down", "runbook_url": "https://r/Up.md"},
    }
    assert UP.annotations == (("summary", "down"),)  # frozen: annotated() is a new rule
    assert Alert("W", "vector(1)", (), ()).to_yaml() == {
        "alert": "W",
        "expr": "vector(1)",
        "labels": {},
        "annotations": {},
    }


def test_a_group_names_a_known_family_and_layer() -> None:
    with pytest.raises(ValueError, match=r"group g: family 'slos', layer 'global'"):
        Group("g", (), "slos")
    with pytest.raises(ValueError, match=r"layer 'shard'"):
        Group("g", (), CATALOG, layer="shard")


def test_each_group_goes_to_the_file_its_tags_name() -> None:
    groups = [
        Group("c", (RATE,), CATALOG),
        Group("s-b", (RATE,), SLO, objective="b-latency", model="b"),
        Group("s-a", (RATE,), SLO, objective="a-availability", model="a"),
        Group("o", (UP,), OPERATIONAL),
        Group("r", (UP,), OPERATIONAL, layer=layers.REPLICA),
        Group("s-a2", (UP,), SLO, objective="a-latency", model="a"),
    ]
    assert {name: [g.name for g in gs] for name, gs in rulefiles.by_file(groups).items()} == {
        "catalog.rules.yml": ["c"],
        "operational.rules.yml": ["o"],
        "replica.rules.yml": ["r"],
        "model-a.rules.yml": ["s-a", "s-a2"],
        "model-b.rules.yml": ["s-b"],
    }
    assert list(rulefiles.documents(groups)["model-a.rules.yml"]["groups"][1]) == ["name", "rules"]


def test_prometheusrules_split_by_tags() -> None:
    per_model = Alert("Q", 'q{model="a"} > 1', (("severity", "ticket"),), (), model="a")
    groups = [
        Group("c", (RATE,), CATALOG),
        Group("o", (UP, per_model), OPERATIONAL),
        Group("r", (UP,), OPERATIONAL, layer=layers.REPLICA),
        Group("s-a", (RATE,), SLO, objective="a-availability", model="a"),
    ]
    foreign = [{"name": "team-a", "rules": [{"record": "t", "expr": "1"}]}]
    out = manifests.prometheus_rules(groups, foreign)
    got = {d["metadata"]["name"]: [g["name"] for g in d["spec"]["groups"]] for d in out}
    assert got == {
        "tritonwatch-replica": ["r"],
        "tritonwatch-global": ["c", "o", "team-a"],
        # the operational group's per-model rule becomes o-a; the objective's group keeps its name
        "tritonwatch-model-a": ["s-a", "o-a"],
    }
    model_a = out[2]
    assert model_a["metadata"]["annotations"] == {manifests.MODEL_ANNOTATION: "a"}
    assert model_a["spec"]["groups"][1]["rules"] == [per_model.to_yaml()]
    assert [d["metadata"]["labels"][manifests.LAYER_LABEL] for d in out] == ["replica", "global", "global"]


def test_amconfig_takes_typed_matchers() -> None:
    assert alertmanager.Matcher("a", "=", 'x"y\\z').text() == 'a="x\\"y\\\\z"'
    config = alertmanager.typed_config(slo.load(SLO_FILE))
    server_down = amconfig.alertmanager_config(config)["spec"]["inhibitRules"][0]
    assert server_down == {
        "sourceMatch": [{"name": "alertname", "value": "TritonServerDown", "matchType": "="}],
        "targetMatch": [
            {"name": "model", "value": ".+", "matchType": "=~"},
            {"name": "instance", "value": ".+", "matchType": "=~"},
        ],
        "equal": ["instance"],
    }
    assert config.to_yaml()["inhibit_rules"][0]["target_matchers"] == ['model=~".+"', 'instance=~".+"']


# Modules that turn the typed model into files or objects: none may parse what another one wrote.
WRITERS = (
    "alerts/generate.py",
    "alerts/model.py",
    "alerts/rulefiles.py",
    "alerts/alertmanager.py",
    "deploy/manifests.py",
    "deploy/amconfig.py",
)


@pytest.mark.parametrize("path", WRITERS)
def test_no_writer_uses_regular_expressions(path: str) -> None:
    tree = ast.parse((ROOT / path).read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not imported & {"re", "regex"}, path


def _fleet(models: int) -> slo.SLOFile:
    doc = yaml.safe_load(SLO_FILE.read_text())
    (one,) = doc["spec"]["slos"]
    doc["spec"]["slos"] = [{**one, "model": f"Model_{i:03d}"} for i in range(models)]
    return slo.parse(doc)


def _test_files(spec: slo.SLOFile) -> dict[str, str]:
    return {name: generate.dump(doc, "") for name, doc in promtestfiles.test_files(spec).items()}


def test_a_test_file_does_not_grow_with_the_fleet() -> None:
    small, large = _test_files(_fleet(2)), _test_files(_fleet(20))
    # per model: availability, latency, operational; and the fleet's operational file
    assert len(small) == 2 * 3 + 1 and len(large) == 20 * 3 + 1
    for name in (
        "tests/slo-Model_000-availability.test.yml",
        "tests/slo-Model_000-latency.test.yml",
        "tests/operational-Model_000.test.yml",
        "tests/operational.test.yml",
    ):
        assert large[name] == small[name], name  # the same bytes: its own rules and series only
    assert yaml.safe_load(large["tests/slo-Model_000-latency.test.yml"])["rule_files"] == [
        "../model-Model_000.rules.yml"
    ]
    assert yaml.safe_load(large["tests/operational-Model_000.test.yml"])["rule_files"] == [
        "../catalog.rules.yml",
        "../model-Model_000.rules.yml",
    ]
    # linear total: every model's files are the same size (names of one width)
    fleet = len(small["tests/operational.test.yml"])
    assert sum(map(len, large.values())) - fleet == 10 * (sum(map(len, small.values())) - fleet)


@stacks.needs("promtool")
def test_promtool_passes_an_objectives_file_of_a_fleet(tmp_path: Path) -> None:
    slo_path = tmp_path / "slo.yaml"
    doc = yaml.safe_load(SLO_FILE.read_text())
    doc["spec"]["slos"] = [{**doc["spec"]["slos"][0], "model": f"Model_{i:03d}"} for i in range(20)]
    slo_path.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    generate.write(generate.render(str(slo_path)), out)
    files = [
        f"tests/{n}-Model_019{k}.test.yml"
        for n, k in (("slo", "-availability"), ("slo", "-latency"), ("operational", ""))
    ]
    run = subprocess.run(
        ["promtool", "test", "rules", *files], cwd=out, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("SUCCESS") == 3
