"""What ``tritonwatch k8s`` gets right by itself, without an operator reading docs/deploy.md first:

- the pages reach a receiver under the Prometheus Operator's default matcher strategy (``OnNamespace``:
  an AlertmanagerConfig's routes only see alerts labelled with its namespace): every rule it packs keeps
  ``namespace`` through each aggregation, and the Alertmanager config groups and inhibits by it;
- a paging receiver without an integration is named, in one line;
- the report CronJob reads the SLO file;
- the base and the overlays' kustomizations come from package data, in the namespace asked for.

The same on a real control plane: tests/test_kubernetes_cluster.py.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tritonwatch.alerts import alertmanager
from tritonwatch.deploy import amconfig, base, k8s, manifests, operator_rules, receivers, report
from tritonwatch.errors import UsageError
from tritonwatch.slo import load

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ROOT / "deploy" / "kubernetes" / "generated"
SLO_FILE = ROOT / "alerts" / "slo.yaml"
DASHBOARDS_DIR = ROOT / "dashboards" / "generated"
_AGGREGATION = re.compile(
    r"\b(?:sum|min|max|avg|count|group|stddev|stdvar|topk|bottomk|quantile) by \(([^)]*)\)"
)


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _rules() -> list[dict[str, Any]]:
    return [r for d in _docs(GENERATED / k8s.RULES_FILE) for g in d["spec"]["groups"] for r in g["rules"]]


def test_every_packed_aggregation_keeps_the_namespace() -> None:
    """The SLO file names no grouping; the rules packed for the operator still aggregate by namespace, so
    the burn page carries the label the operator's route matches."""
    assert load(SLO_FILE).grouping == ()
    rules = _rules()
    groupings = [
        (r.get("alert") or r.get("record"), by) for r in rules for by in _AGGREGATION.findall(r["expr"])
    ]
    assert len(groupings) > 100  # (the SLIs' raw series are read once, over 5m: fewer than the 213 of old)
    assert [(name, by) for name, by in groupings if "namespace" not in by.split(", ")] == []
    # the burn page: its SLI records aggregate the raw series by (model, namespace) (every longer window
    # reads those records)
    burn = [
        r for r in rules if r.get("alert") == "TritonSLOErrorBudgetBurn" and r["labels"]["severity"] == "page"
    ]
    assert len(burn) == 2  # availability and latency of fraud_detector
    records = {
        (r["record"], r["labels"]["slo"]): r["expr"]
        for r in rules
        if r.get("record", "").startswith("slo:sli_") and "sum by" in r["expr"]
    }
    assert len(records) >= 4 and all("sum by (model, namespace)" in e for e in records.values()), records


def test_every_packed_alert_carries_the_namespace_the_operator_routes_by() -> None:
    """An alert whose result cannot carry ``namespace`` (absent(), vector()) gets the deployment's as a
    static label: else the operator's OnNamespace route never takes it (a Triton target gone pages)."""
    alerts = [r for r in _rules() if "alert" in r]
    static = sorted(
        {(r["alert"], r["labels"].get("cause", "")) for r in alerts if "namespace" in r["labels"]}
    )
    assert static == [
        ("TritonSLONoData", "no_samples"),
        ("TritonSLONoData", "no_series"),
        ("TritonServerDown", "no_target"),
        ("TritonwatchSidecarDown", ""),
        ("Watchdog", ""),
    ]
    assert {r["labels"]["namespace"] for r in alerts if "namespace" in r["labels"]} == {"triton"}


def test_the_alertmanager_config_groups_and_inhibits_by_namespace() -> None:
    (am,) = _docs(GENERATED / k8s.AMCONFIG_FILE)
    assert am["spec"]["route"]["groupBy"] == ["alertname", "model", "slo", "namespace"]
    # a server down in one namespace mutes only that namespace's alerts
    assert [r["equal"] for r in am["spec"]["inhibitRules"]] == [
        ["instance", "namespace"],
        ["alertname", "slo", "model", "namespace"],
        ["instance", "namespace"],
    ]
    (secret,) = _docs(GENERATED / k8s.ALERTMANAGER_FILE)
    plain = yaml.safe_load(secret["stringData"]["alertmanager.yaml"])
    assert plain["route"]["group_by"] == ["alertname", "model", "slo", "namespace"]


def test_a_grouping_that_names_the_namespace_is_kept_as_it_is(tmp_path: Path) -> None:
    text = SLO_FILE.read_text().replace(
        "  up_job: triton\n", "  up_job: triton\n  grouping: [cluster, namespace]\n"
    )
    slo = tmp_path / "slo.yaml"
    slo.write_text(text)
    spec = load(slo)
    packed = operator_rules.for_operator(spec, slo)
    assert packed.grouping == ("cluster", "namespace")
    (slo_group,) = [
        g
        for g in operator_rules.rule_documents(packed, "triton")["model-fraud_detector.rules.yml"]["groups"]
        if g["name"] == "tritonwatch-slo-fraud_detector-availability"
    ]
    assert "sum by (model, cluster, namespace)" in slo_group["rules"][0]["expr"]


def test_hand_written_rule_files_are_packed_beside_the_generated_ones(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "team-a.rules.yml").write_text(
        "groups:\n  - name: team-a\n    rules:\n      - record: a:b\n        expr: vector(1)\n"
    )
    # a file `tritonwatch rules` wrote is made afresh from --slo, never packed as it was
    (rules / "model-fraud_detector.rules.yml").write_text(
        "# generated by tritonwatch rules from old.yaml (old); do not edit.\ngroups: [{name: old, rules: []}]\n"
    )
    assert operator_rules.hand_written(rules) == [
        {"name": "team-a", "rules": [{"record": "a:b", "expr": "vector(1)"}]}
    ]
    assert operator_rules.hand_written(None) == []
    with pytest.raises(UsageError, match=r"--rules .*nowhere: not a directory"):
        operator_rules.hand_written(tmp_path / "nowhere")
    argv = ["--slo", str(SLO_FILE), "--dashboards", str(DASHBOARDS_DIR), "--rules", str(rules)]
    assert k8s.main([*argv, "--out", str(tmp_path / "out")]) == 0
    packed = list(yaml.safe_load_all((tmp_path / "out" / k8s.RULES_FILE).read_text()))
    names = [g["name"] for d in packed for g in d["spec"]["groups"]]
    assert "team-a" in names and "old" not in names
    (model,) = [
        d
        for d in packed
        if d["metadata"].get("annotations", {}).get(manifests.MODEL_ANNOTATION) == "fraud_detector"
    ]
    assert "sum by (model, namespace)" in json.dumps(model)


def test_paging_receivers_without_an_integration_are_named_in_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    argv = ["--slo", str(SLO_FILE), "--dashboards", str(DASHBOARDS_DIR), "--out", str(tmp_path / "out")]
    with caplog.at_level(logging.WARNING, logger="tritonwatch.deploy.k8s"):
        assert k8s.main(argv) == 0
    lines = [r.getMessage() for r in caplog.records if "no integration" in r.getMessage()]
    assert lines == [
        "alertmanagerconfig.yaml: receivers default, page, ticket have no integration, so their pages reach "
        'nobody: add one from a Secret with an overlay patch (docs/deploy.md, "Receivers on Kubernetes")'
    ]
    # the watchdog's receiver is meant to be silent here; a receiver with an integration is not named
    doc = amconfig.alertmanager_config(
        alertmanager.typed_config(operator_rules.for_operator(load(SLO_FILE), SLO_FILE))
    )
    assert _docs(tmp_path / "out" / k8s.AMCONFIG_FILE) == [doc]
    assert receivers.silent(doc) == ["default", "page", "ticket"]
    doc["spec"]["receivers"][1]["webhookConfigs"] = [{"urlSecret": {"name": "s", "key": "page-url"}}]
    assert receivers.silent(doc) == ["default", "ticket"]


def test_the_report_cronjob_reads_the_slo_file() -> None:
    slo_map, claim, _server, _service, cron = _docs(GENERATED / k8s.REPORT_FILE)
    assert (slo_map["kind"], slo_map["metadata"]["name"]) == ("ConfigMap", report.SLO_CONFIGMAP)
    assert slo_map["data"] == {"slo.yaml": SLO_FILE.read_text()}
    assert claim["kind"] == "PersistentVolumeClaim"
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert f"--slo={report.SLO_PATH}" in container["args"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["slo"] == {"name": "slo", "mountPath": "/etc/tritonwatch", "readOnly": True}
    assert {"name": "slo", "configMap": {"name": report.SLO_CONFIGMAP}} in pod["volumes"]


def test_the_base_and_overlays_are_written_from_package_data_in_the_namespace(tmp_path: Path) -> None:
    argv = ["--slo", str(SLO_FILE), "--dashboards", str(DASHBOARDS_DIR), "--namespace", "inference"]
    argv += ["--base", str(tmp_path / "kubernetes"), "--autoscaling", str(tmp_path / "autoscaling")]
    assert k8s.main([*argv, "--triton265", str(tmp_path / "triton265")]) == 0
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.yaml"))
    assert written == sorted(
        [f"kubernetes/{n}" for n in base.BASE_FILES]
        + [f"kubernetes/generated/{n}" for n in (k8s.RULES_FILE, k8s.DASHBOARDS_FILE, k8s.AMCONFIG_FILE,
                                                 k8s.ALERTMANAGER_FILE, k8s.REPORT_FILE)]
        + [f"autoscaling/{n}" for n in base.AUTOSCALING_FILES]
        + ["autoscaling/keda/scaledobject.yaml", "autoscaling/prometheus-adapter/hpa.yaml",
           "autoscaling/prometheus-adapter/values.yaml", "autoscaling/sidecar-slo/slo-configmap.yaml"]
        + [f"triton265/{n}" for n in base.TRITON265_FILES] + ["triton265/native-latency/model-metrics.yaml"]
    )  # fmt: skip
    checkout = ROOT / "deploy"
    for rel in (
        *(f"kubernetes/{n}" for n in base.BASE_FILES),
        *(f"autoscaling/{n}" for n in base.AUTOSCALING_FILES),
    ):
        want = (checkout / rel).read_text()
        want = want.replace("namespace: triton\n", "namespace: inference\n")
        if rel.endswith("namespace.yaml"):
            want = want.replace("  name: triton\n", "  name: inference\n")
        assert (tmp_path / rel).read_text() == want, rel
    for kustomization in tmp_path.rglob("kustomization.yaml"):
        assert "namespace: triton" not in kustomization.read_text(), kustomization


def test_out_and_base_disagreeing_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--slo", str(SLO_FILE), "--base", str(tmp_path / "k"), "--out", str(tmp_path / "elsewhere")]
    assert k8s.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "with --base" in err and "generated" in err, err
    assert not (tmp_path / "k").exists()
