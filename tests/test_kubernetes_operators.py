"""deploy/ as operators run it (kube-prometheus-stack, KEDA, prometheus-adapter), checked offline:

- a fleet of 200 models: ``kubectl apply -k --dry-run=client`` (kubectl itself, against a stand-in API
  server that only answers discovery: tests/support/fake_apiserver.py) takes every object, and every
  object's annotations, the last-applied one kubectl writes included, stay under what Kubernetes stores;
- the AlertmanagerConfig routes as the plain Alertmanager config does (``amtool config routes test``
  on both, for every receiver and label combination), and inhibits the same;
- the autoscalers' query (``promtool test rules``): a model the capacity fit refuses, breaking its
  latency objective, pushes it over the threshold while the modelled ones alone stay under; another
  namespace does not count; no signal at all is no answer (KEDA's fallback, the HPA's hold), never 0;
- the Triton 2.65+ overlay: Triton's own histogram, each model's model_metrics stanza, no tracing.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import need_binary
from support.fake_apiserver import fake_apiserver
from test_kubernetes import load_all

from tritonwatch import catalog
from tritonwatch.cli import main as cli_main
from tritonwatch.deploy import amconfig, k8s, scaling
from tritonwatch.deploy.render import ANNOTATIONS_LIMIT, LAST_APPLIED, last_applied_bytes
from tritonwatch.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent
RULES_DIR = ROOT / "alerts" / "generated"
DASHBOARDS_DIR = ROOT / "dashboards" / "generated"
SLO_FILE = ROOT / "alerts" / "slo.yaml"
MODELS = 200


def _fleet_slo(path: Path, models: int) -> Path:
    data = yaml.safe_load(SLO_FILE.read_text())
    (one,) = data["spec"]["slos"]
    data["spec"]["slos"] = [{**one, "model": f"Model_{i:03d}.onnx"} for i in range(models)]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _annotations_bytes(doc: dict[str, Any]) -> int:
    return sum(len(k.encode()) + len(v.encode()) for k, v in doc["metadata"].get("annotations", {}).items())


def test_200_models_fit_what_kubectl_apply_stores(tmp_path: Path) -> None:
    need_binary("kubectl")
    slo = _fleet_slo(tmp_path / "slo.yaml", MODELS)
    assert cli_main(["rules", "--slo", str(slo), "--out", str(tmp_path / "rules")]) == 0
    base = tmp_path / "kubernetes"
    shutil.copytree(ROOT / "deploy" / "kubernetes", base, ignore=shutil.ignore_patterns("generated", "*.py"))
    argv = ["--rules", str(tmp_path / "rules"), "--dashboards", str(DASHBOARDS_DIR), "--slo", str(slo)]
    assert k8s.main([*argv, "--out", str(base / "generated")]) == 0
    with fake_apiserver(tmp_path) as kubeconfig:
        out = subprocess.run(
            ["kubectl", "apply", "-k", str(base), "--dry-run=client", "--validate=false", "-o", "json"],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)},
        )
    assert out.returncode == 0, out.stderr[-3000:]
    items = json.loads(out.stdout)["items"]
    rules = [d for d in items if d["kind"] == "PrometheusRule"]
    assert len(rules) == 2 + MODELS  # replica, global (the fleet's aggregation, whole), one per model
    sizes = {}
    for doc in items:
        stored = _annotations_bytes(doc)
        sizes[(doc["kind"], doc["metadata"]["name"])] = stored
        assert LAST_APPLIED in doc["metadata"]["annotations"]
        # our count of what kubectl stores is kubectl's, to the byte
        plain = copy.deepcopy(doc)
        del plain["metadata"]["annotations"][LAST_APPLIED]
        assert last_applied_bytes(plain) == stored, doc["metadata"]["name"]
    largest = max(sizes.items(), key=lambda kv: kv[1])
    assert largest[1] < ANNOTATIONS_LIMIT, largest
    # every generated rule is in one object, and the objects that grow with the fleet are the models'
    generated = sum(
        len(g["rules"])
        for p in (tmp_path / "rules").glob("*.rules.yml")
        for g in yaml.safe_load(p.read_text())["groups"]
    )
    assert sum(len(g["rules"]) for d in rules for g in d["spec"]["groups"]) == generated
    (fleet,) = [d for d in rules if d["metadata"]["name"] == "tritonwatch-global"]
    assert not [g for g in fleet["spec"]["groups"] if "Model_" in json.dumps(g)]
    # negative control: the global layer in one object, as before, is over the limit at this size
    whole = copy.deepcopy(fleet)
    whole["spec"]["groups"] = [
        g for d in rules if d["metadata"]["name"] != "tritonwatch-replica" for g in d["spec"]["groups"]
    ]
    assert last_applied_bytes(whole) > 10 * ANNOTATIONS_LIMIT


def test_an_object_over_the_limit_is_refused_naming_it(tmp_path: Path) -> None:
    dashboards = tmp_path / "dashboards"
    dashboards.mkdir()
    (dashboards / "huge.json").write_text(json.dumps({"title": "x" * ANNOTATIONS_LIMIT}))
    spec, _ = k8s.load_slo(SLO_FILE)
    with pytest.raises(UsageError, match=r"ConfigMap tritonwatch-dashboard-huge: \d+ bytes once applied"):
        k8s.render_all(RULES_DIR, dashboards, spec)


# --- AlertmanagerConfig -----------------------------------------------------------------------
_OPS = {"=": "=", "!=": "!=", "=~": "=~", "!~": "!~"}
_KEYS = {v: k for k, v in amconfig._ROUTE_KEYS.items()}


def _matcher_text(m: dict[str, str]) -> str:
    return f"{m['name']}{_OPS[m['matchType']]}{json.dumps(m['value'])}"


def _plain_route(route: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in route.items():
        if key == "matchers":
            out["matchers"] = [_matcher_text(m) for m in value]
        elif key == "routes":
            out["routes"] = [_plain_route(r) for r in value]
        else:
            out[_KEYS[key]] = value
    return out


def to_plain(config: dict[str, Any]) -> dict[str, Any]:
    """The AlertmanagerConfig's spec back in Alertmanager's own format (what the operator renders)."""
    spec = config["spec"]
    inhibit = []
    for rule in spec.get("inhibitRules", []):
        plain: dict[str, Any] = {}
        for field, key in (("sourceMatch", "source_matchers"), ("targetMatch", "target_matchers")):
            if field in rule:
                plain[key] = [_matcher_text(m) for m in rule[field]]
        if "equal" in rule:
            plain["equal"] = rule["equal"]
        inhibit.append(plain)
    return {"route": _plain_route(spec["route"]), "inhibit_rules": inhibit, "receivers": spec["receivers"]}


def _route(config: Path, labels: dict[str, str]) -> str:
    argv = ["amtool", "config", "routes", "test", f"--config.file={config}"]
    out = subprocess.run(
        [*argv, *(f"{k}={v}" for k, v in labels.items())], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.strip()


def test_the_alertmanagerconfig_routes_and_inhibits_as_the_plain_config(tmp_path: Path) -> None:
    need_binary("amtool")
    plain_text = (RULES_DIR / "alertmanager.yml").read_text()
    (generated,) = load_all((ROOT / "deploy" / "kubernetes" / "generated" / k8s.AMCONFIG_FILE).read_text())
    assert generated["apiVersion"] == "monitoring.coreos.com/v1alpha1"
    assert generated == amconfig.alertmanager_config(amconfig.load(plain_text))
    back = to_plain(generated)
    plain = yaml.safe_load(plain_text)
    assert back["inhibit_rules"] == plain["inhibit_rules"]
    assert back["route"] == plain["route"]
    (tmp_path / "plain.yml").write_text(plain_text)
    (tmp_path / "back.yml").write_text(yaml.safe_dump(back))
    check = subprocess.run(
        ["amtool", "check-config", str(tmp_path / "back.yml")], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr
    seen = set()
    alertnames = ["Watchdog", catalog.SLO_BURN_ALERT, catalog.SERVER_DOWN_ALERT, "SomethingElse"]
    for alertname, severity, model in itertools.product(
        alertnames, ["page", "ticket", "none", None], ["fraud_detector", None]
    ):
        labels = {
            "alertname": alertname,
            **({"severity": severity} if severity else {}),
            **({"model": model} if model else {}),
        }
        want = _route(tmp_path / "plain.yml", labels)
        assert _route(tmp_path / "back.yml", labels) == want, labels
        seen.add(want)
    assert seen == {r["name"] for r in plain["receivers"]}  # every receiver reached


def test_receivers_with_integrations_are_named_not_dropped_silently(tmp_path: Path) -> None:
    plain = yaml.safe_load((RULES_DIR / "alertmanager.yml").read_text())
    plain["receivers"][1] = {"name": "page", "pagerduty_configs": [{"routing_key_file": "/etc/pd"}]}
    assert amconfig.integrations_left_out(plain) == ["page"]
    with pytest.raises(UsageError, match=r"route\.routes\[0\]\.matchers: matcher 'alertname Watchdog'"):
        broken = copy.deepcopy(plain)
        broken["route"]["routes"][0]["matchers"] = ["alertname Watchdog"]
        amconfig.alertmanager_config(broken)
