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
from support import make_generate, stacks
from support.fake_apiserver import fake_apiserver
from test_kubernetes import load_all

from tritonwatch import catalog, slo
from tritonwatch.alerts import alertmanager
from tritonwatch.cli import main as cli_main
from tritonwatch.deploy import amconfig, k8s, operator_rules, scaling
from tritonwatch.deploy.render import ANNOTATIONS_LIMIT, LAST_APPLIED, last_applied_bytes
from tritonwatch.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent
RULES_DIR = ROOT / "alerts" / "generated"
DASHBOARDS_DIR = ROOT / "dashboards" / "generated"
SLO_FILE = ROOT / "alerts" / "slo.yaml"
MODELS = 200
# libyaml's parser where PyYAML has it: the fleet's rule files are megabytes (the same documents either way)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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
        for g in yaml.load(p.read_text(), Loader=_LOADER)["groups"]
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
        k8s.render_all(RULES_DIR, dashboards, spec, SLO_FILE.read_text(), SLO_FILE)


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


@stacks.needs("amtool")
def test_the_alertmanagerconfig_routes_and_inhibits_as_the_plain_config(tmp_path: Path) -> None:
    need_binary("amtool")
    packed = operator_rules.for_operator(k8s.load_slo(SLO_FILE)[0], SLO_FILE)
    plain_text = operator_rules.alertmanager_text(packed, SLO_FILE, "")
    (generated,) = load_all((ROOT / "deploy" / "kubernetes" / "generated" / k8s.AMCONFIG_FILE).read_text())
    assert generated["apiVersion"] == "monitoring.coreos.com/v1alpha1"
    assert generated == amconfig.alertmanager_config(alertmanager.typed_config(packed))
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


def test_receivers_with_integrations_are_named_not_dropped_silently() -> None:
    doc = yaml.safe_load(SLO_FILE.read_text())
    doc["spec"]["alertmanager"] = {
        "receivers": {"page": {"pagerduty_configs": [{"routing_key_file": "/etc/pd"}]}}
    }
    config = alertmanager.typed_config(slo.parse(doc))
    assert amconfig.integrations_left_out(config) == ["page"]
    # the AlertmanagerConfig names the receiver and leaves its secrets to the plain config
    receivers = amconfig.alertmanager_config(config)["spec"]["receivers"]
    assert receivers == [{"name": "default"}, {"name": "page"}, {"name": "ticket"}, {"name": "watchdog"}]


# --- the autoscalers' query -------------------------------------------------------------------
# "modelled" has a capacity estimate (10 req/s of 100: utilisation 0.1) and serves well within its
# objective; "pipeline" is an ensemble the capacity fit refuses (no capacity series), 99.9 % within 25 ms:
# fast for 10 minutes, then half its requests take 25-50 ms. A staging namespace runs "modelled" at 5x
# its capacity: it must not scale this Deployment.
SCALING_SLO = """\
apiVersion: tritonwatch/v1
kind: ServiceLevelObjectives
metadata: {name: scaling}
spec:
  window: 28d
  slos:
    - model: modelled
      latency: {threshold: 50ms, objective: 99}
    - model: pipeline
      latency: {threshold: 25ms, objective: 99.9}
"""
BUCKETS = ("0.005", "0.01", "0.025", "0.05", "+Inf")


def _series(namespace: str, pipeline: bool) -> list[dict[str, str]]:
    def s(name: str, job: str, values: str, **labels: str) -> dict[str, str]:
        ls = ",".join(
            f'{k}="{v}"' for k, v in {"namespace": namespace, "job": job, "pod": "p0", **labels}.items()
        )
        return {"series": f"{name}{{{ls}}}", "values": values}

    mv = {"model": "modelled", "version": "1"}
    rate, capacity = ("0+600x40", "100+0x40") if namespace == scaling.NAMESPACE else ("0+600x40", "2+0x40")
    out = [
        s(catalog.TRITON_SUCCESS, scaling.TRITON_JOB, rate, **mv),
        s(catalog.CAPACITY, scaling.SIDECAR_JOB, capacity, **mv),
        s(catalog.CAPACITY_OBJECTIVE, scaling.SIDECAR_JOB, "0.05+0x40", model="modelled", quantile="0.99"),
    ]
    bucket = f"{catalog.REQUEST_DURATION}_bucket"
    for le in BUCKETS:  # every request of "modelled" within 5-10 ms
        out.append(
            s(
                bucket,
                scaling.SIDECAR_JOB,
                "0+0x40" if le == "0.005" else "0+600x40",
                phase="request",
                le=le,
                **mv,
            )
        )
    if pipeline:
        pv = {"model": "pipeline", "version": "1"}
        out.append(
            s(
                catalog.CAPACITY_OBJECTIVE,
                scaling.SIDECAR_JOB,
                "0.025+0x40",
                model="pipeline",
                quantile="0.999",
            )
        )
        slow = {"0.005": "0+0x40", "0.01": "0+600x10 6000+300x30", "0.025": "0+600x10 6000+300x30"}
        for le in BUCKETS:
            out.append(s(bucket, scaling.SIDECAR_JOB, slow.get(le, "0+600x40"), phase="request", le=le, **pv))
    return out


def _case(query: str, at: str, over: bool | None) -> dict[str, Any]:
    samples = [] if over is None else [{"labels": "{}", "value": int(over)}]
    return {"expr": f"({query}) > bool {scaling.TARGET}", "eval_time": at, "exp_samples": samples}


@pytest.mark.prometheus
@stacks.needs("promtool")
def test_a_refused_model_breaking_its_objective_scales_the_deployment(tmp_path: Path) -> None:
    need_binary("promtool")
    (tmp_path / "slo.yaml").write_text(SCALING_SLO)
    spec, _ = k8s.load_slo(tmp_path / "slo.yaml")
    query = scaling.query(spec, scaling.NAMESPACE)
    (tmp_path / "none.rules.yml").write_text("groups: []\n")
    staging = _series("staging", pipeline=False)
    tests = [
        {  # the modelled ones alone: under the threshold, now and later; staging's load not counted
            "interval": "1m",
            "input_series": _series(scaling.NAMESPACE, pipeline=False) + staging,
            "promql_expr_test": [_case(query, "8m", False), _case(query, "25m", False)],
        },
        {  # the refused model within its objective, then breaking it: over the threshold
            "interval": "1m",
            "input_series": _series(scaling.NAMESPACE, pipeline=True) + staging,
            "promql_expr_test": [_case(query, "8m", False), _case(query, "25m", True)],
        },
        {  # the signal missing (sidecars gone): no answer, never 0 (KEDA: a failure, then the fallback)
            "interval": "1m",
            "input_series": [d for d in _series(scaling.NAMESPACE, True) if d["series"].startswith("nv_")],
            "promql_expr_test": [
                _case(query, "25m", None),
                {"expr": query, "eval_time": "25m", "exp_samples": []},
            ],
        },
    ]
    (tmp_path / "scaling.test.yml").write_text(
        yaml.safe_dump(
            {"rule_files": ["none.rules.yml"], "evaluation_interval": "1m", "tests": tests}, sort_keys=False
        )
    )
    out = subprocess.run(
        ["promtool", "test", "rules", "scaling.test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    # negative control: without the latency term, the breaking refused model goes unseen
    capacity_only = query.split("\n  or\n")[0] + "\n)"
    tests[1]["promql_expr_test"] = [_case(capacity_only, "25m", True)]
    (tmp_path / "scaling.test.yml").write_text(
        yaml.safe_dump(
            {"rule_files": ["none.rules.yml"], "evaluation_interval": "1m", "tests": tests[1:2]},
            sort_keys=False,
        )
    )
    out = subprocess.run(
        ["promtool", "test", "rules", "scaling.test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0 and "exp:" in out.stdout + out.stderr, out.stdout + out.stderr


def test_the_query_names_each_objective_quantile_once() -> None:
    spec = k8s.load_slo(SLO_FILE)[0]
    query = scaling.query(spec, "inference")
    assert query.count("histogram_quantile(0.99,") == 1 and 'quantile="0.99"' in query
    assert query.count('namespace="inference"') == 4 and "ignoreNullValues" not in query


# --- Triton 2.65+ ---------------------------------------------------------------------------
def test_the_triton_265_overlay_runs_triton_s_histogram_without_tracing(tmp_path: Path) -> None:
    need_binary("kubectl")
    out = subprocess.run(
        ["kubectl", "kustomize", str(ROOT / "deploy" / "triton265")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    docs = load_all(out.stdout)
    (deployment,) = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "triton"]
    pod = deployment["spec"]["template"]["spec"]
    containers = {c["name"]: c for c in pod["containers"]}
    triton, side = containers["triton"], containers["tritonwatch"]
    assert triton["image"] == "nvcr.io/nvidia/tritonserver:26.01-py3"  # Triton 2.65
    assert "--metrics-config=histogram_latencies=true" in triton["args"]
    assert not [a for a in triton["args"] if a.startswith("--trace")]
    assert not [a for a in side["args"] if a.startswith("--otlp-listen")]  # the sidecar's receiver stays off
    (stanzas,) = [
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == k8s.MODEL_METRICS_CONFIGMAP
    ]
    # the stanzas `tritonwatch rules` writes, without their two header lines (the ConfigMap's file has its own)
    generated = {
        p.name: p.read_text().split("\n", 2)[2] for p in (RULES_DIR / "triton").glob("*.model_metrics.pbtxt")
    }
    assert stanzas["data"] == generated and generated
    import kubernetes_validate

    kubernetes_validate.validate(deployment, "1.37.0", strict=True)

    # Triton serves /models, laid out by the init container from the original repository (/models-src)
    mounts = {m["mountPath"]: m["name"] for m in triton["volumeMounts"]}
    (init,) = pod["initContainers"]
    init_mounts = {m["mountPath"]: m["name"] for m in init["volumeMounts"]}
    assert (
        init_mounts["/models"] == mounts["/models"]
        and init_mounts["/models-src"] == mounts["/models-src"] == "models"
    )
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[init_mounts["/model-metrics"]]["configMap"]["name"] == k8s.MODEL_METRICS_CONFIGMAP

    # the init container's script, run here on a copy of the demo repository and the ConfigMap's files
    src, dst, cm = tmp_path / "src", tmp_path / "dst", tmp_path / "cm"
    shutil.copytree(ROOT / "model_repository", src)
    dst.mkdir()
    cm.mkdir()
    for name, text in stanzas["data"].items():
        (cm / name).write_text(text)
    (cm / "absent.model_metrics.pbtxt").write_text(next(iter(generated.values())))
    run = subprocess.run(
        [*init["command"], init["args"][0]],
        env={**os.environ, "SRC": str(src), "DST": str(dst), "STANZAS": str(cm)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert "absent: not in the model repository" in run.stderr
    config = (dst / "fraud_detector" / "config.pbtxt").read_text()
    original = (src / "fraud_detector" / "config.pbtxt").read_text()
    assert config == original + "\n" + generated["fraud_detector.model_metrics.pbtxt"]
    assert (dst / "fraud_detector" / "1" / "model.onnx").is_symlink()  # no model file copied
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    parsed = text_format.Parse(config, model_config_pb2.ModelConfig())
    (control,) = parsed.model_metrics.metric_control
    assert control.metric_identifier.family == "nv_inference_first_response_histogram_ms"
    assert 50 in control.histogram_options.buckets  # the SLO's 50 ms threshold is a bound
    # run again on a repository whose config sets model_metrics already: kept as it is
    again = tmp_path / "dst2"
    again.mkdir()
    (src / "fraud_detector" / "config.pbtxt").write_text(config)
    rerun = subprocess.run(
        [*init["command"], init["args"][0]],
        env={**os.environ, "SRC": str(src), "DST": str(again), "STANZAS": str(cm)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert rerun.returncode == 0 and "sets model_metrics already" in rerun.stderr
    assert (again / "fraud_detector" / "config.pbtxt").read_text() == config


def test_the_triton_265_files_are_up_to_date(tmp_path: Path) -> None:
    make_generate.run("k8s", tmp_path)
    fresh = (tmp_path / "deploy" / "triton265" / k8s.MODEL_METRICS_FILE).read_text()
    assert fresh == (ROOT / "deploy" / "triton265" / k8s.MODEL_METRICS_FILE).read_text(), (
        "run `make generate`"
    )


@pytest.mark.parametrize(
    "overlay", ["kubernetes", "autoscaling/keda", "autoscaling/prometheus-adapter", "triton265"]
)
def test_kubectl_apply_dry_run_takes_every_overlay(overlay: str, tmp_path: Path) -> None:
    need_binary("kubectl")
    with fake_apiserver(tmp_path) as kubeconfig:
        out = subprocess.run(
            [
                "kubectl",
                "apply",
                "-k",
                str(ROOT / "deploy" / overlay),
                "--dry-run=client",
                "--validate=false",
                "-o",
                "json",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)},
        )
    assert out.returncode == 0, out.stderr[-3000:]
    items = json.loads(out.stdout)["items"]
    kinds = {d["kind"] for d in items}
    assert {"Deployment", "PrometheusRule", "AlertmanagerConfig", "PodMonitor"} <= kinds
    assert max(_annotations_bytes(d) for d in items) < ANNOTATIONS_LIMIT
    (deployment,) = [d for d in items if d["kind"] == "Deployment" and d["metadata"]["name"] == "triton"]
    assert ("replicas" in deployment["spec"]) == (not overlay.startswith("autoscaling/"))


def test_object_names_are_dns_names_and_never_shared() -> None:
    import re

    from tritonwatch.deploy.render import dns_name

    names = [
        "fraud_detector",
        "fraud-detector",
        "Fraud_Detector",
        "a.b",
        "a-b",
        "x" * 200,
        "tritonwatch-fleet",
    ]
    made = [dns_name(n) for n in names]
    assert len(set(made)) == len(made)
    for name in made:
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name) and len("tritonwatch-model-" + name) <= 63
    assert dns_name("tritonwatch-fleet") == "fleet" and dns_name("a-b") == "a-b"  # unchanged where it fits
