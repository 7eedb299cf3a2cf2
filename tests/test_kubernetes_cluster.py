"""tritonwatch on a real Kubernetes control plane, one per module (tests/support/kube.py: etcd,
kube-apiserver and the Prometheus Operator built from their Go modules, with the operator's and KEDA's
CRDs):

- server-side apply with strict field validation takes every object ``tritonwatch k8s`` writes: the base
  with the report CronJob, each overlay (KEDA, HPA, Triton 2.65+) and a fleet of 200 models; a misplaced
  field is refused, naming it;
- shaped as kube-prometheus-stack installs them (a ``Prometheus`` and an ``Alertmanager`` that select by
  its ``release`` label, the chart's base Alertmanager config routing to ``null``, the operator's default
  matcher strategy), the operator selects the generated PrometheusRules and writes its rule files: they
  load into a real Prometheus 3.16, where the SLO burn page fires; the Alertmanager configuration it
  generates loads into a real Alertmanager 0.35, and that page, posted by that Prometheus, reaches the
  tritonwatch receiver (docs/deploy.md's worked overlay: a webhook from a Secret), with the repository's
  own alerts/slo.yaml;
- a PrometheusRule the operator refuses (an invalid expression) stays out of the rule files, and the
  test reads why from the operator's event and log.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import kube, stacks
from support.static_endpoint import serve, shutdown
from test_kubernetes import docs_overlay, load_all
from test_kubernetes_operators import _fleet_slo

from tritonwatch.deploy import k8s
from tritonwatch.local.promstack import Alertmanager, Prometheus, ScrapeTarget, prometheus_config

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SLO_FILE = ROOT / "alerts" / "slo.yaml"
DASHBOARDS_DIR = ROOT / "dashboards" / "generated"
MODEL = "fraud_detector"
RELEASE = "kube-prometheus-stack"
MONITORING = "monitoring"
PROMETHEUS = f"{RELEASE}-prometheus"
ALERTMANAGER = f"{RELEASE}-alertmanager"
# kube-prometheus-stack's default Alertmanager configuration (values.yaml, alertmanager.config)
KPS_ALERTMANAGER_CONFIG = """\
global:
  resolve_timeout: 5m
inhibit_rules:
  - source_matchers: ['severity = critical']
    target_matchers: ['severity =~ warning|info']
    equal: [namespace, alertname]
route:
  group_by: [namespace]
  group_wait: 30s
  group_interval: 5m
  repeat_interval: 12h
  receiver: 'null'
  routes:
    - receiver: 'null'
      matchers: [alertname = "Watchdog"]
receivers:
  - name: 'null'
templates:
  - /etc/alertmanager/config/*.tmpl
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kube.ControlPlane]:
    with kube.control_plane(tmp_path_factory.mktemp("control-plane")) as plane:
        yield plane


def _generate(tree: Path, slo: Path, namespace: str, *extra: str) -> Path:
    """``tritonwatch k8s`` with the base and every overlay into ``tree``, as from a pip install."""
    argv = ["--slo", str(slo), "--dashboards", str(DASHBOARDS_DIR), "--namespace", namespace]
    argv += ["--base", str(tree / "kubernetes"), *extra]
    assert k8s.main(argv) == 0
    return tree


def _render(cluster: kube.ControlPlane, kustomization: Path) -> list[dict[str, Any]]:
    return load_all(cluster.kubectl("kustomize", str(kustomization)).stdout)


def _resource_name(doc: dict[str, Any]) -> str:
    """How kubectl names an object in its output: ``deployment.apps/triton``, ``configmap/x``."""
    group = doc["apiVersion"].rpartition("/")[0]
    return f"{doc['kind'].lower()}{'.' + group if group else ''}/{doc['metadata']['name']}"


def _apply(cluster: kube.ControlPlane, kustomization: Path) -> dict[str, str]:
    """Server-side apply with strict field validation; kubectl's verdict by object."""
    out = cluster.kubectl(
        "apply", "-k", str(kustomization), "--server-side", "--validate=strict",
        "--field-manager=tritonwatch", "--force-conflicts", timeout=300,
    )  # fmt: skip
    return dict(line.rsplit(" ", 1) for line in out.stdout.splitlines())


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The base and every overlay, as ``tritonwatch k8s`` writes them for the namespace ``triton``."""
    out = tmp_path_factory.mktemp("tree")
    extra = ["--autoscaling", str(out / "autoscaling"), "--triton265", str(out / "triton265")]
    return _generate(out, SLO_FILE, "triton", *extra)


def test_server_side_apply_takes_the_base_every_overlay_and_the_report(
    cluster: kube.ControlPlane, tree: Path
) -> None:
    rendered: dict[str, list[dict[str, Any]]] = {}
    for overlay in ("kubernetes", "autoscaling/keda", "autoscaling/prometheus-adapter", "triton265"):
        rendered[overlay] = _render(cluster, tree / overlay)
        applied = _apply(cluster, tree / overlay)
        assert applied == {_resource_name(d): "serverside-applied" for d in rendered[overlay]}, overlay
    kinds = {d["kind"] for docs in rendered.values() for d in docs}
    assert kinds == {
        "Namespace", "Deployment", "Service", "PodMonitor", "PrometheusRule", "ConfigMap",
        "AlertmanagerConfig", "PersistentVolumeClaim", "CronJob", "ScaledObject", "HorizontalPodAutoscaler",
    }  # fmt: skip
    # what is stored is what was sent: no field pruned by a CRD's schema
    (sent,) = [d for d in rendered["autoscaling/keda"] if d["kind"] == "ScaledObject"]
    stored = cluster.get("scaledobject", "triton", "-n", "triton")
    assert stored["spec"] == sent["spec"]
    (sent_am,) = [d for d in rendered["kubernetes"] if d["kind"] == "AlertmanagerConfig"]
    assert cluster.get("alertmanagerconfig", "tritonwatch", "-n", "triton")["spec"] == sent_am["spec"]
    # the report reads the SLO file: mounted from its ConfigMap, passed with --slo
    cron = cluster.get("cronjob", "tritonwatch-report", "-n", "triton")
    (container,) = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert "--slo=/etc/tritonwatch/slo.yaml" in container["args"]
    slo_map = cluster.get("configmap", "tritonwatch-report-slo", "-n", "triton")
    assert slo_map["data"] == {"slo.yaml": SLO_FILE.read_text()}


MISPLACED = {
    # a PodMonitor endpoint's interval one level up, on the spec
    "PodMonitor": (lambda d: d["spec"].update(interval=d["spec"]["podMetricsEndpoints"][0].pop("interval")),
                   ".spec.interval: field not declared in schema"),
    # the Prometheus trigger's threshold beside its metadata instead of in it
    "ScaledObject": (lambda d: d["spec"]["triggers"][0].update(threshold="0.7"),
                     ".spec.triggers[0].threshold: field not declared in schema"),
    # a container's port list under the pod
    "Deployment": (lambda d: d["spec"]["template"]["spec"].update(ports=[{"containerPort": 8000}]),
                   ".spec.template.spec.ports: field not declared in schema"),
}  # fmt: skip


@pytest.mark.parametrize("kind", sorted(MISPLACED))
def test_a_misplaced_field_is_refused_naming_it(cluster: kube.ControlPlane, tree: Path, kind: str) -> None:
    args = ["apply", "-f", "-", "--server-side", "--validate=strict", "--field-manager=tritonwatch"]
    # (the Deployment: Triton's, not the report archive's server)
    (doc,) = [
        d
        for d in _render(cluster, tree / "autoscaling" / "keda")
        if d["kind"] == kind and (kind != "Deployment" or d["metadata"]["name"] == "triton")
    ]
    doc["metadata"]["namespace"] = "default"
    # the object as generated is taken (the refusal below is the field's, not the object's)
    accepted = cluster.kubectl(*args, "--dry-run=server", stdin=json.dumps(doc))
    assert accepted.stdout.strip() == f"{_resource_name(doc)} serverside-applied (server dry run)"
    move, error = MISPLACED[kind]
    move(doc)
    refused = cluster.kubectl(*args, stdin=json.dumps(doc), check=False)
    assert refused.returncode != 0
    # server-side apply checks every field against the schema: the object is refused whole, naming the field
    assert refused.stderr.startswith("Error from server: failed to create typed patch object (default/"), (
        refused.stderr
    )
    assert refused.stderr.rstrip().endswith(error), refused.stderr


def test_a_fleet_of_200_models_is_accepted_and_the_operator_shards_its_rules(
    cluster: kube.ControlPlane, tmp_path: Path
) -> None:
    slo = _fleet_slo(tmp_path / "slo.yaml", 200)
    tree = _generate(tmp_path / "tree", slo, "fleet")
    rendered = _render(cluster, tree / "kubernetes")
    applied = _apply(cluster, tree / "kubernetes")
    assert applied == {_resource_name(d): "serverside-applied" for d in rendered}
    rules = {d["metadata"]["name"]: d for d in rendered if d["kind"] == "PrometheusRule"}
    assert len(rules) == 2 + 200  # replica, global, one per model
    # a Prometheus of this namespace's rules: the operator packs them into its rule-file ConfigMaps
    prom = _prometheus("fleet", "fleet", {"app.kubernetes.io/part-of": "tritonwatch"},
                       {"kubernetes.io/metadata.name": "fleet"})  # fmt: skip
    cluster.kubectl(
        "apply", "--server-side", "--field-manager=tritonwatch-tests", "-f", "-", stdin=json.dumps(prom)
    )
    files = _rule_files(cluster, "fleet", "fleet", len(rules))
    shards = {cm for cm, _ in files}
    assert len(shards) >= 2, shards  # over what one ConfigMap holds: sharded
    by_name = {
        re.sub(r"^fleet-(.*)-[0-9a-f-]{36}\.yaml$", r"\1", key): text for (_, key), text in files.items()
    }
    assert set(by_name) == set(rules)
    for name, text in by_name.items():  # each file is its PrometheusRule's groups, whole
        assert yaml.safe_load(text)["groups"] == rules[name]["spec"]["groups"], name


def _prometheus(
    name: str, namespace: str, rule_labels: dict[str, str], namespaces: dict[str, str]
) -> dict[str, Any]:
    """A ``Prometheus`` as kube-prometheus-stack writes it (its selectors by label, Prometheus 3.16)."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "Prometheus",
        "metadata": {"name": name, "namespace": namespace, "labels": {"release": RELEASE}},
        "spec": {
            "version": "v3.16.0",
            "image": "quay.io/prometheus/prometheus:v3.16.0",
            "replicas": 1,
            "serviceAccountName": name,
            "ruleSelector": {"matchLabels": rule_labels},
            "ruleNamespaceSelector": {"matchLabels": namespaces} if namespaces else {},
            "podMonitorSelector": {"matchLabels": {"release": RELEASE}},
            "podMonitorNamespaceSelector": {},
            "serviceMonitorSelector": {"matchLabels": {"release": RELEASE}},
            "serviceMonitorNamespaceSelector": {},
            "evaluationInterval": "30s",
            "scrapeInterval": "30s",
            "alerting": {
                "alertmanagers": [
                    {
                        "namespace": MONITORING,
                        "name": ALERTMANAGER,
                        "port": "http-web",
                        "pathPrefix": "/",
                        "apiVersion": "v2",
                    }  # fmt: skip
                ]
            },
        },
    }


def _rule_files(
    cluster: kube.ControlPlane, prometheus: str, namespace: str, count: int, timeout: float = 120
) -> dict[tuple[str, str], str]:
    """(ConfigMap, key) -> rule file, of ``prometheus-<name>-rulefiles-N``, once they hold ``count`` files."""

    def files() -> dict[tuple[str, str], str] | None:
        maps = cluster.get("configmaps", "-n", namespace)["items"]
        found = {
            (cm["metadata"]["name"], key): text
            for cm in maps
            if cm["metadata"]["name"].startswith(f"prometheus-{prometheus}-rulefiles-")
            for key, text in (cm.get("data") or {}).items()
        }
        return found if len(found) == count else None

    return kube.poll(files, timeout, f"{count} rule files of Prometheus {namespace}/{prometheus}")


# --- kube-prometheus-stack: the rules loaded, the page routed -----------------------------------------
@pytest.fixture(scope="module")
def stack(cluster: kube.ControlPlane) -> kube.ControlPlane:
    """kube-prometheus-stack's monitoring objects: its Prometheus and Alertmanager, and the chart's base
    Alertmanager configuration."""
    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": MONITORING}},
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": f"alertmanager-{ALERTMANAGER}", "namespace": MONITORING},
            "stringData": {"alertmanager.yaml": KPS_ALERTMANAGER_CONFIG},
        },
        _prometheus(PROMETHEUS, MONITORING, {"release": RELEASE}, {}),
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "Alertmanager",
            "metadata": {"name": ALERTMANAGER, "namespace": MONITORING, "labels": {"release": RELEASE}},
            # alertmanagerConfigMatcherStrategy left out: the operator's default (OnNamespace)
            "spec": {
                "version": "v0.35.0",
                "image": "quay.io/prometheus/alertmanager:v0.35.0",
                "replicas": 1,
                "alertmanagerConfigSelector": {"matchLabels": {"release": RELEASE}},
                "alertmanagerConfigNamespaceSelector": {},
            },
        },
    ]
    stdin = yaml.safe_dump_all(objects)
    cluster.kubectl("apply", "--server-side", "--field-manager=tritonwatch-tests", "-f", "-", stdin=stdin)
    return cluster


class _Sink:
    """The receivers' webhook: every notification Alertmanager posts, by path."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with sink.lock:
                    sink.posts.append((self.path, body))
                self.send_response(200)
                self.end_headers()

        self.httpd = serve(Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def received(self, path: str) -> list[dict[str, Any]]:
        with self.lock:
            return [body for p, body in self.posts if p == path]


class _Triton:
    """Triton's request counters for one model, half of its requests failing, as ``/metrics`` serves them."""

    def __init__(self, per_second: int = 200) -> None:
        start = time.monotonic()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                n = int((time.monotonic() - start) * per_second)
                labels = f'model="{MODEL}",version="1"'
                body = (
                    f"# TYPE nv_inference_request_success counter\n"
                    f"nv_inference_request_success{{{labels}}} {n}\n"
                    f"# TYPE nv_inference_request_failure counter\n"
                    f'nv_inference_request_failure{{{labels},reason="BACKEND"}} {n}\n'
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = serve(Handler)
        self.address = f"127.0.0.1:{self.httpd.server_address[1]}"


def _generated_alertmanager_config(cluster: kube.ControlPlane, must_contain: str) -> str:
    """The operator's ``alertmanager-<name>-generated`` configuration, once it merged ``must_contain``."""

    def config() -> str | None:
        got = cluster.kubectl("get", "secret", f"alertmanager-{ALERTMANAGER}-generated", "-n", MONITORING,
                              "-o", "json", check=False)  # fmt: skip
        if got.returncode != 0:
            return None
        text = gzip.decompress(
            base64.b64decode(json.loads(got.stdout)["data"]["alertmanager.yaml.gz"])
        ).decode()
        return text if must_contain in text else None

    return kube.poll(config, 120, f"the operator's Alertmanager configuration with {must_contain}")


def _amtool_route(amtool: str, config: Path, labels: dict[str, str]) -> str:
    out = subprocess.run(
        [amtool, "config", "routes", "test", f"--config.file={config}", *(f"{k}={v}" for k, v in labels.items())],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return out.stdout.strip()


@stacks.only(
    "current", "the operator writes configuration for the Prometheus and Alertmanager it runs: today's"
)
def test_the_slo_page_reaches_the_tritonwatch_receiver_through_the_operator(
    stack: kube.ControlPlane, tmp_path: Path, platform: stacks.Stack
) -> None:
    namespace = docs_overlay()[0]
    tree = _generate(tmp_path, SLO_FILE, namespace, "--autoscaling", str(tmp_path / "autoscaling"))
    overlay = tree / "my-cluster"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(docs_overlay()[1])
    sink = _Sink()
    triton = _Triton()
    with contextlib.ExitStack() as running:
        running.callback(shutdown, sink.httpd)
        running.callback(shutdown, triton.httpd)
        stack.kubectl("create", "namespace", namespace)
        stack.kubectl("create", "secret", "generic", "tritonwatch-receivers", "-n", namespace,
                      f"--from-literal=page-url={sink.url}/page", f"--from-literal=ticket-url={sink.url}/ticket")  # fmt: skip
        applied = _apply(stack, overlay)
        assert set(applied.values()) == {"serverside-applied"}
        ours = [d for d in _render(stack, overlay) if d["kind"] == "PrometheusRule"]
        files = _rule_files(stack, PROMETHEUS, MONITORING, len(ours))
        assert {key.split("-tritonwatch-")[0] for _, key in files} == {namespace}  # only ours are selected
        rules_dir = tmp_path / "rulefiles"
        rules_dir.mkdir()
        for (_, key), text in files.items():
            (rules_dir / key).write_text(text)
        am_text = _generated_alertmanager_config(stack, f"{namespace}/tritonwatch/page")
        am_config = tmp_path / "alertmanager.yaml"
        am_config.write_text(am_text)
        page = {"alertname": "TritonSLOErrorBudgetBurn", "severity": "page", "model": MODEL,
                "slo": f"{MODEL}-availability"}  # fmt: skip
        # the operator's route: only alerts of the AlertmanagerConfig's namespace reach its receivers;
        # without the label the page goes to the chart's null receiver (what the rules of `tritonwatch rules`
        # alone, grouped by model, would send)
        assert _amtool_route(platform.amtool, am_config, {**page, "namespace": namespace}) == (
            f"{namespace}/tritonwatch/page"
        )
        assert _amtool_route(platform.amtool, am_config, page) == "null"
        am = Alertmanager(tmp_path / "am", am_config, binary=platform.alertmanager)
        running.callback(am.stop)
        am.wait_ready(60)
        pod = {"namespace": namespace, "pod": "triton-0", "container": "triton", "endpoint": "metrics"}
        config = prometheus_config(
            [ScrapeTarget("triton", triton.address, labels=pod)],
            rule_files=sorted(rules_dir.glob("*.yaml")),
            alertmanager=am.address,
        )
        prom = Prometheus(tmp_path / "prometheus", config, binary=platform.prometheus)
        running.callback(prom.stop)
        prom.wait_ready(60)
        posted = kube.poll(lambda: _paged(sink), 180, "the SLO page at the tritonwatch receiver", 1)
    assert posted["receiver"] == f"{namespace}/tritonwatch/page"
    alert = posted["alerts"][0]
    assert {k: alert["labels"][k] for k in (*page, "namespace")} == {**page, "namespace": namespace}
    assert alert["annotations"]["runbook_url"].endswith("/TritonSLOErrorBudgetBurn.md")


def _paged(sink: _Sink) -> dict[str, Any] | None:
    for body in sink.received("/page"):
        if any(a["labels"].get("alertname") == "TritonSLOErrorBudgetBurn" for a in body["alerts"]):
            return body
    return None


def test_a_rule_the_operator_refuses_is_left_out_and_says_why(stack: kube.ControlPlane) -> None:
    stack.kubectl("create", "namespace", "refused")
    broken = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "tritonwatch-broken", "namespace": "refused", "labels": {"release": RELEASE}},
        "spec": {"groups": [{"name": "broken", "rules": [{"alert": "Broken", "expr": "sum(rate(x[5m])"}]}]},
    }
    # the API server takes it (its schema does not parse PromQL); the operator refuses it
    stack.kubectl("apply", "--server-side", "--validate=strict", "--field-manager=tritonwatch-tests", "-f", "-",
                  stdin=json.dumps(broken))  # fmt: skip

    def event() -> dict[str, Any] | None:
        items = stack.get("events", "-n", "refused")["items"]
        return next((e for e in items if e["involvedObject"]["name"] == "tritonwatch-broken"), None)

    seen = kube.poll(event, 120, "the operator's event on the refused PrometheusRule")
    assert seen["reason"] == "InvalidConfiguration"
    assert seen["type"] == "Warning"
    assert (
        seen["message"]
        == "PrometheusRule tritonwatch-broken was rejected due to invalid configuration: invalid rule"
    )
    # the event says that it was refused; the operator's log says why
    logged = [json.loads(line) for line in stack.operator_log().splitlines() if "tritonwatch-broken" in line]
    (why,) = {e["err"] for e in logged if e.get("msg") == "invalid rule"}
    assert (
        'rule 1, "Broken": could not parse expression: 1:16: parse error: unclosed left parenthesis' in why
    ), why
    assert any(e.get("msg") == "skipping prometheusrule" and e.get("namespace") == "refused" for e in logged)
    keys = [
        key
        for cm in stack.get("configmaps", "-n", MONITORING)["items"]
        if cm["metadata"]["name"].startswith(f"prometheus-{PROMETHEUS}-rulefiles-")
        for key in (cm.get("data") or {})
    ]
    assert keys and not [k for k in keys if k.startswith("refused-")], keys
