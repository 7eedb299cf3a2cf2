"""deploy/kubernetes, checked offline: kustomize renders it, the core kinds validate against the
Kubernetes OpenAPI schemas (kubernetes-validate, strict: unknown fields fail), the generated manifests
match what ``tritonwatch k8s`` writes from alerts/generated, dashboards/generated and the SLO file, the
PrometheusRules' groups hold every generated rule once and pass ``promtool check rules``, the
Alertmanager Secret passes ``amtool check-config``, and the pod's containers, the Service and the
PodMonitor agree on ports. tests/test_kubernetes_operators.py: the fleet at 200 models, the
AlertmanagerConfig, the autoscalers' query, the Triton 2.65+ overlay.
"""

from __future__ import annotations

import argparse
import copy
import importlib.metadata
import json
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from conftest import need_binary
from support import make_generate, stacks

from tritonwatch import catalog
from tritonwatch.alerts import layers
from tritonwatch.cli import build_parser
from tritonwatch.cli import main as cli_main
from tritonwatch.deploy import base, k8s, manifests, operator_rules, scaling
from tritonwatch.exporters import sidecar
from tritonwatch.exporters.config import resolve

ROOT = Path(__file__).resolve().parent.parent
KUSTOMIZE_DIR = ROOT / "deploy" / "kubernetes"
RULES_DIR = ROOT / "alerts" / "generated"
DASHBOARDS_DIR = ROOT / "dashboards" / "generated"
SLO_FILE = ROOT / "alerts" / "slo.yaml"
CORE_KINDS = {"Namespace", "ConfigMap", "Service", "Deployment", "CronJob", "PersistentVolumeClaim"}
# The oldest Kubernetes still commonly run, and the newest kubernetes-validate ships schemas for.
K8S_VERSIONS = ("1.29.0", "1.37.0")


class KustomizeLoader(yaml.SafeLoader):
    """kustomize writes ``matchType: =`` unquoted, which YAML 1.2 reads as "=" and PyYAML (YAML 1.1)
    as the ``value`` type it has no constructor for: read it as the string it is."""


KustomizeLoader.add_constructor("tag:yaml.org,2002:value", lambda loader, node: loader.construct_scalar(node))  # type: ignore[arg-type]


def load_all(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.load_all(text, Loader=KustomizeLoader) if d]


def _require_generated() -> None:
    if not sorted(RULES_DIR.glob("*.rules.yml")) or not (RULES_DIR / "alertmanager.yml").is_file():
        pytest.fail("alerts/generated is not generated (run `make generate`)", pytrace=False)
    if not sorted(DASHBOARDS_DIR.glob("*.json")):
        pytest.fail("dashboards/generated is not generated (run `make generate`)", pytrace=False)


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    need_binary("kubectl")
    _require_generated()
    out = subprocess.run(
        ["kubectl", "kustomize", str(KUSTOMIZE_DIR)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return load_all(out.stdout)


def _one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"{len(found)} {kind} {name or ''}"
    return found[0]


def _containers(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    pod = _one(docs, "Deployment", "triton")["spec"]["template"]["spec"]
    return {c["name"]: c for c in pod["containers"]}


def _flag(argv: list[str], name: str) -> str:
    (value,) = [a[len(name) + 1 :] for a in argv if a.startswith(f"{name}=")]
    return value


def test_renders_every_part_in_one_namespace(rendered: list[dict[str, Any]]) -> None:
    kinds = sorted({d["kind"] for d in rendered})
    assert kinds == sorted(CORE_KINDS | {"PodMonitor", "PrometheusRule", "AlertmanagerConfig"})
    namespace = _one(rendered, "Namespace")["metadata"]["name"]
    for doc in rendered:
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == namespace, doc["metadata"]["name"]
        assert doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "tritonwatch"
    # One PrometheusRule per rule layer (tritonwatch.alerts.layers) and one per model, labelled with
    # their layer; the model's carries its name (a DNS name cannot spell every model name).
    prometheus_rules = [d for d in rendered if d["kind"] == "PrometheusRule"]
    assert sorted(
        (d["metadata"]["name"], d["metadata"]["labels"][manifests.LAYER_LABEL]) for d in prometheus_rules
    ) == [
        ("tritonwatch-global", "global"),
        ("tritonwatch-model-fraud-detector-56e83637", "global"),
        ("tritonwatch-replica", "replica"),
    ]
    (model_rule,) = [d for d in prometheus_rules if "annotations" in d["metadata"]]
    assert model_rule["metadata"]["annotations"] == {manifests.MODEL_ANNOTATION: "fraud_detector"}
    dashboards = sorted(DASHBOARDS_DIR.glob("*.json"))
    maps = sorted(d["metadata"]["name"] for d in rendered if d["kind"] == "ConfigMap")
    # a ConfigMap per dashboard, and the SLO file the report reads
    assert maps == sorted(
        [f"tritonwatch-dashboard-{p.stem.removeprefix('tritonwatch-')}" for p in dashboards]
        + ["tritonwatch-report-slo"]
    )


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_core_kinds_validate_against_the_kubernetes_schemas(
    rendered: list[dict[str, Any]], version: str
) -> None:
    import kubernetes_validate

    validated = set()
    for doc in rendered:
        if doc["kind"] in CORE_KINDS:
            kubernetes_validate.validate(doc, version, strict=True)
            validated.add(doc["kind"])
    assert validated == CORE_KINDS


def test_the_schema_check_rejects_a_broken_deployment(rendered: list[dict[str, Any]]) -> None:
    """Negative control: the same validator fails on a misspelt field and on a wrong type."""
    import kubernetes_validate

    deployment = _one(rendered, "Deployment", "triton")
    typo = copy.deepcopy(deployment)
    typo["spec"]["template"]["spec"]["containers"][1]["port"] = typo["spec"]["template"]["spec"][
        "containers"
    ][1].pop("ports")
    wrong_type = copy.deepcopy(deployment)
    wrong_type["spec"]["replicas"] = "two"
    for broken in (typo, wrong_type):
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(broken, K8S_VERSIONS[-1], strict=True)


def test_generated_manifests_are_up_to_date(tmp_path: Path) -> None:
    _require_generated()
    argv = make_generate.run("k8s", tmp_path)
    fresh = {p.name: p.read_text() for p in (tmp_path / "deploy" / "kubernetes" / "generated").iterdir()}
    committed = {p.name: p.read_text() for p in (KUSTOMIZE_DIR / "generated").iterdir()}
    assert sorted(fresh) == sorted(committed)
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert not stale, f"deploy/kubernetes/generated is stale: {stale}; run `make generate`"
    for text in committed.values():
        assert text.startswith("# generated by tritonwatch k8s") and "do not edit" in text.splitlines()[0]
        # the header's command is make generate's, and the CLI parses it
        regenerate = text.splitlines()[1].removeprefix("# Regenerate: ")
        assert shlex.split(regenerate) == ["tritonwatch", *argv]
        parsed = build_parser().parse_args(shlex.split(regenerate)[1:])
        assert parsed._run is k8s.run and parsed.slo == Path("alerts/slo.yaml")


def test_every_header_names_the_command_that_was_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An operator's own SLO file and namespace: the "Regenerate:" line of every file (manifests and
    overlays) is their command, paths as they typed them, not make generate's."""
    _require_generated()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my-slo.yaml").write_text(SLO_FILE.read_text())
    argv = ["k8s", "--slo", "my-slo.yaml", "--namespace", "inference", "--rules", str(RULES_DIR)]
    argv += ["--dashboards", str(DASHBOARDS_DIR), "--out", "out", "--autoscaling", "a", "--triton265", "t"]
    assert cli_main(argv) == 0
    # (the overlays' kustomizations are package data, not generated: no header)
    written = [p for p in tmp_path.rglob("*.yaml") if p.read_text().startswith("# generated by")]
    assert len(written) == 10
    line = (
        f"# Regenerate: tritonwatch k8s --slo my-slo.yaml --namespace inference --rules {RULES_DIR} "
        f"--dashboards {DASHBOARDS_DIR} --out out --autoscaling a --triton265 t"
    )
    assert {p.read_text().splitlines()[1] for p in written} == {line}


def _rules_of(groups: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for g in groups for r in g["rules"])


@pytest.mark.prometheus
def test_prometheusrule_groups_pass_promtool(
    platform: stacks.Stack, rendered: list[dict[str, Any]], tmp_path: Path
) -> None:
    """Every generated rule is in exactly one PrometheusRule of its layer, and each object's groups load."""
    need_binary("promtool")
    by_layer: dict[str, list[dict[str, Any]]] = {layer: [] for layer in layers.LAYERS}
    for rule in (d for d in rendered if d["kind"] == "PrometheusRule"):
        name = rule["metadata"]["name"]
        by_layer[rule["metadata"]["labels"][manifests.LAYER_LABEL]] += rule["spec"]["groups"]
        plain = tmp_path / f"{name}.yml"
        plain.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}, sort_keys=False))
        out = subprocess.run(
            ["promtool", "check", "rules", str(plain)], capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stdout + out.stderr
        count = sum(len(g["rules"]) for g in rule["spec"]["groups"])
        assert f"SUCCESS: {count} rules found" in out.stdout
    # the rules packed for the operator: the SLO file's, with namespace in the grouping (deploy/operator_rules.py)
    packed = operator_rules.rule_documents(
        operator_rules.for_operator(k8s.load_slo(SLO_FILE)[0], SLO_FILE), scaling.NAMESPACE
    )
    for layer, groups in by_layer.items():
        sources = [name for name in packed if layers.layer_of(name) == layer]
        want = [g for name in sources for g in packed[name]["groups"]]
        assert _rules_of(groups) == _rules_of(want), layer


@pytest.mark.prometheus
def test_alertmanager_secret_passes_amtool(
    platform: stacks.Stack, rendered: list[dict[str, Any]], tmp_path: Path
) -> None:
    need_binary("amtool")
    (secret,) = yaml.safe_load_all((KUSTOMIZE_DIR / "generated" / k8s.ALERTMANAGER_FILE).read_text())
    assert secret["metadata"]["name"] == f"alertmanager-{manifests.ALERTMANAGER_NAME}"
    config = secret["stringData"]["alertmanager.yaml"]
    packed = operator_rules.for_operator(k8s.load_slo(SLO_FILE)[0], SLO_FILE)
    assert yaml.safe_load(config) == yaml.safe_load(operator_rules.alertmanager_text(packed, SLO_FILE, ""))
    path = tmp_path / "alertmanager.yaml"
    path.write_text(config)
    out = subprocess.run(["amtool", "check-config", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_dashboards_are_configmaps_for_the_grafana_sidecar(rendered: list[dict[str, Any]]) -> None:
    maps = [
        d
        for d in rendered
        if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("tritonwatch-dashboard-")
    ]
    seen = {}
    for cm in maps:
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        # kube-prometheus-stack: grafana.sidecar.dashboards.folderAnnotation=grafana_folder
        assert cm["metadata"]["annotations"] == {"grafana_folder": "tritonwatch"}
        ((key, text),) = cm["data"].items()
        seen[key] = json.loads(text)
    expected = {p.name: json.loads(p.read_text()) for p in DASHBOARDS_DIR.glob("*.json")}
    assert seen == expected


def test_pod_service_and_podmonitor_agree(rendered: list[dict[str, Any]]) -> None:
    containers = _containers(rendered)
    assert set(containers) == {"triton", "tritonwatch"}
    triton, side = containers["triton"], containers["tritonwatch"]
    ports = {p["name"]: p["containerPort"] for c in containers.values() for p in c["ports"]}
    assert containers["triton"]["resources"]["limits"]["nvidia.com/gpu"] == 1
    # The sidecar image is the one compose/Dockerfile builds, tagged with the package version.
    version = importlib.metadata.version("tritonwatch")
    assert side["image"] == f"tritonwatch-sidecar:{version}"

    # The sidecar reaches Triton and receives its traces on localhost, on the ports Triton uses.
    parser = argparse.ArgumentParser()
    sidecar.add_arguments(parser)
    cfg = resolve(parser.parse_args(side["args"]))
    assert cfg.triton == f"http://127.0.0.1:{ports['http']}"
    assert cfg.triton_metrics == f"http://127.0.0.1:{_flag(triton['args'], '--metrics-port')}/metrics"
    assert int(_flag(triton["args"], "--metrics-port")) == ports["metrics"]
    assert cfg.listen_host_port[1] == ports["tritonwatch"]
    trace = urlsplit(_flag(triton["args"], "--trace-config=opentelemetry,url"))
    assert (trace.hostname, trace.port, trace.path) == (
        "127.0.0.1",
        int(cfg.otlp_listen.rpartition(":")[2]),
        "/v1/traces",
    )
    assert "--trace-config=rate=100" in triton["args"]
    flags = {a.dest for a in parser._actions}
    for env in side.get("env", []):
        assert env["name"].removeprefix("TRITONWATCH_").lower() in flags, env["name"]

    security = side["securityContext"]
    assert security["runAsNonRoot"] is True and security["runAsUser"] != 0
    assert security["readOnlyRootFilesystem"] is True and security["capabilities"]["drop"] == ["ALL"]

    pod_labels = _one(rendered, "Deployment", "triton")["spec"]["template"]["metadata"]["labels"]
    service = _one(rendered, "Service", "triton")
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert {p["targetPort"] for p in service["spec"]["ports"]} == {"http", "grpc"}

    monitor = _one(rendered, "PodMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    jobs = {}
    for endpoint in monitor["spec"]["podMetricsEndpoints"]:
        assert endpoint["port"] in ports, endpoint["port"]
        (relabel,) = [r for r in endpoint["relabelings"] if r["targetLabel"] == "job"]
        jobs[endpoint["port"]] = relabel["replacement"]
    assert set(jobs) == {"metrics", "tritonwatch"}
    # TritonServerDown's up{job=~spec.up_job} selects Triton's endpoint and not the sidecar's.
    up_job = yaml.safe_load((ROOT / "alerts" / "slo.yaml").read_text())["spec"].get("up_job", "triton")
    assert re.fullmatch(up_job, jobs["metrics"]) and not re.fullmatch(up_job, jobs["tritonwatch"])


def test_generator_names_the_missing_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    spec, _ = k8s.load_slo(SLO_FILE)
    # No rule file in --rules is no error: the generated rules come from --slo, the folder adds hand-written ones.
    assert k8s.RULES_FILE in k8s.render_all(empty, DASHBOARDS_DIR, spec, SLO_FILE.read_text(), SLO_FILE)
    for argv, needle in (
        (["--rules", str(tmp_path / "missing"), "--slo", str(SLO_FILE)], "missing"),
        # never the demo's SLO file in the sidecars' ConfigMap: the operator names theirs
        (["--rules", str(RULES_DIR)], "the following arguments are required: --slo"),
        (["--slo", str(tmp_path / "nope.yaml")], "nope.yaml"),
    ):
        code = k8s.main([*argv, "--out", str(tmp_path / "out")])
        err = capsys.readouterr().err.strip()
        assert code == 2 and err.count("\n") == 0 and needle in err, err
        assert not (tmp_path / "out").exists()


# --- autoscaling on the SLO-bound headroom (issue 39, docs/headroom.md) --------------------------
AUTOSCALING_DIR = ROOT / "deploy" / "autoscaling"


def _overlay(name: str) -> list[dict[str, Any]]:
    need_binary("kubectl")
    _require_generated()
    out = subprocess.run(
        ["kubectl", "kustomize", str(AUTOSCALING_DIR / name)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return load_all(out.stdout)


def test_autoscaling_files_are_up_to_date(tmp_path: Path) -> None:
    _require_generated()
    make_generate.run("k8s", tmp_path)
    written = tmp_path / "deploy" / "autoscaling"
    fresh = {p.relative_to(written): p.read_text() for p in written.rglob("*.yaml")}
    # the generated files, and the overlays' kustomizations (package data, in the default namespace)
    assert sorted(map(str, fresh)) == sorted(
        [
            scaling.SLO_CONFIGMAP_FILE,
            scaling.KEDA_FILE,
            scaling.HPA_FILE,
            scaling.ADAPTER_FILE,
            *base.AUTOSCALING_FILES,
        ]
    )
    stale = [str(p) for p, text in fresh.items() if (AUTOSCALING_DIR / p).read_text() != text]
    assert not stale, f"deploy/autoscaling is stale: {stale}; run `make generate`"


@pytest.mark.parametrize("overlay", ["keda", "prometheus-adapter"])
def test_autoscaling_overlays_give_the_sidecars_the_slo_file(overlay: str) -> None:
    docs = _overlay(overlay)
    slo_map = _one(docs, "ConfigMap", scaling.SLO_CONFIGMAP)
    assert slo_map["data"]["slo.yaml"] == (ROOT / "alerts" / "slo.yaml").read_text()
    pod = _one(docs, "Deployment", scaling.DEPLOYMENT)["spec"]["template"]["spec"]
    sidecar_container = {c["name"]: c for c in pod["containers"]}["tritonwatch"]
    path = _flag(sidecar_container["args"], "--slo")
    (mount,) = sidecar_container["volumeMounts"]
    assert path == f"{mount['mountPath']}/slo.yaml" and mount["readOnly"] is True
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert volume["configMap"]["name"] == scaling.SLO_CONFIGMAP
    # the sidecar takes those args: with the ConfigMap's file where the pod mounts it, it runs headroom
    parser = argparse.ArgumentParser()
    sidecar.add_arguments(parser)
    args = parser.parse_args(sidecar_container["args"])
    assert args.slo == path
    args.slo = str(ROOT / "alerts" / "slo.yaml")
    assert resolve(args).slo == args.slo
    for version in K8S_VERSIONS:
        import kubernetes_validate

        kubernetes_validate.validate(_one(docs, "Deployment", scaling.DEPLOYMENT), version, strict=True)
        kubernetes_validate.validate(slo_map, version, strict=True)


def test_keda_scales_the_triton_deployment_and_holds_when_the_signal_is_missing() -> None:
    docs = _overlay("keda")
    scaled = _one(docs, "ScaledObject")
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    namespace = _one(docs, "Namespace")["metadata"]["name"]
    assert scaled["metadata"]["namespace"] == namespace
    deployment = _one(docs, "Deployment", "triton")
    target = scaled["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    # the autoscaler owns the replica count: no fixed one for `kubectl apply` to reset it to
    assert "replicas" not in deployment["spec"]
    (trigger,) = scaled["spec"]["triggers"]
    assert (trigger["type"], trigger["metricType"]) == ("prometheus", "Value")
    spec, _ = k8s.load_slo(SLO_FILE)
    assert trigger["metadata"]["query"] == scaling.query(spec, namespace)
    assert float(trigger["metadata"]["threshold"]) < catalog.NEAR_CAPACITY_LIMIT  # scale before the ticket
    # fail safe: an empty answer is a failure (not 0), and after 3 of them KEDA keeps the replicas there are
    assert trigger["metadata"]["ignoreNullValues"] == "false"
    assert scaled["spec"]["fallback"] == {
        "failureThreshold": 3,
        "replicas": scaled["spec"]["minReplicaCount"],
        "behavior": "currentReplicasIfHigher",
    }
    assert not [d for d in docs if d["kind"] == "HorizontalPodAutoscaler"]


def test_the_query_is_scoped_to_the_deployment_the_podmonitor_scrapes() -> None:
    docs = _overlay("keda")
    namespace = _one(docs, "Namespace")["metadata"]["name"]
    jobs = {
        e["port"]: e["relabelings"][0]["replacement"]
        for e in _one(docs, "PodMonitor")["spec"]["podMetricsEndpoints"]
    }
    assert (jobs["metrics"], jobs["tritonwatch"]) == (scaling.TRITON_JOB, scaling.SIDECAR_JOB)
    query = _one(docs, "ScaledObject")["spec"]["triggers"][0]["metadata"]["query"]
    selectors = re.findall(r"\b([a-z_:]+)\{([^}]*)\}", query)
    assert {name for name, _ in selectors} == {
        f"{catalog.TRITON_SUCCESS}",
        catalog.CAPACITY,
        f"{catalog.REQUEST_DURATION}_bucket",
        catalog.CAPACITY_OBJECTIVE,
    }
    for name, matchers in selectors:
        job = scaling.TRITON_JOB if name.startswith("nv_") else scaling.SIDECAR_JOB
        assert f'namespace="{namespace}",job="{job}"' in matchers, name


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_the_hpa_validates_and_reads_the_adapters_external_metric(version: str) -> None:
    import kubernetes_validate

    docs = _overlay("prometheus-adapter")
    hpa = _one(docs, "HorizontalPodAutoscaler")
    kubernetes_validate.validate(hpa, version, strict=True)
    assert hpa["spec"]["scaleTargetRef"]["name"] == _one(docs, "Deployment", "triton")["metadata"]["name"]
    assert "replicas" not in _one(docs, "Deployment", "triton")["spec"]
    (metric,) = hpa["spec"]["metrics"]
    assert metric["type"] == "External" and metric["external"]["target"]["type"] == "Value"
    values = yaml.safe_load((AUTOSCALING_DIR / scaling.ADAPTER_FILE).read_text())
    (rule,) = values["rules"]["external"]
    spec, _ = k8s.load_slo(SLO_FILE)
    namespace = _one(docs, "Namespace")["metadata"]["name"]
    # the KEDA trigger's query whole: an empty answer gives the HPA no metric, and it keeps its replicas
    assert rule["metricsQuery"] == scaling.query(spec, namespace)
    assert "<<" not in rule["metricsQuery"]
    assert rule["seriesQuery"].startswith(catalog.CAPACITY_OBJECTIVE + "{")
    assert rule["name"]["as"] == metric["external"]["metric"]["name"]
    assert not [d for d in docs if d["kind"] == "ScaledObject"]


def test_the_weekly_report_runs_on_a_schedule_into_its_archive(rendered: list[dict[str, Any]]) -> None:
    """The CronJob runs Monday 06:00 UTC, one at a time, the report into the claim's archive, the
    mail settings and SMTP credentials from an optional Secret; its flags are the report's own."""
    from tritonwatch.cli import build_parser
    from tritonwatch.deploy import report as schedule

    job = _one(rendered, "CronJob", schedule.NAME)
    claim = _one(rendered, "PersistentVolumeClaim", schedule.ARCHIVE_CLAIM)
    assert (job["spec"]["schedule"], job["spec"]["timeZone"]) == ("0 6 * * 1", "Etc/UTC")
    assert job["spec"]["concurrencyPolicy"] == "Forbid" and claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "tritonwatch-report:0.1.0"  # kustomization's images entry
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert volumes["archive"]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert container["envFrom"] == [{"secretRef": {"name": "tritonwatch-report", "optional": True}}]
    # No secret in the manifest: no literal environment value but the matplotlib cache and home.
    assert {e["name"] for e in container["env"]} == {"MPLCONFIGDIR", "HOME"}
    # The shell line passes --end as midnight of the day it runs, then the args unchanged.
    sh, dash_c, script, name = container["command"]
    assert (sh, dash_c, name) == ("sh", "-c", "tritonwatch-report")
    assert script == (
        'exec tritonwatch report "--end=$(date -u +%Y-%m-%dT00:00:00Z)" '
        '"--report-url=${TRITONWATCH_REPORT_URL:-http://localhost:8080}" "$@"'
    )
    # The shell's two expansions, as sh makes them: --report-url from the Secret, else the port-forward's.
    for env, url in (
        ({}, "http://localhost:8080"),
        ({"TRITONWATCH_REPORT_URL": "https://r.example.com"}, "https://r.example.com"),
    ):
        said = subprocess.run(
            ["sh", "-c", script.replace("exec tritonwatch report", 'printf "%s\\n"'), "x", *container["args"]],
            capture_output=True, text=True, env={"PATH": os.environ["PATH"], **env}, check=True,
        ).stdout.split("\n")[:-1]  # fmt: skip
        assert said[1] == f"--report-url={url}"
        args = build_parser().parse_args(["report", *said])
        assert args.report_url == url and args.end.endswith("T00:00:00Z")
    assert args.archive == mounts["archive"] == "/archive" and args.days == 7
    assert args.prometheus == scaling.PROMETHEUS_URL
    # The archive is served: read-only, by a pod on the node the report's job is scheduled beside.
    server = _one(rendered, "Deployment", schedule.SERVER)
    service = _one(rendered, "Service", schedule.SERVER)
    spec = server["spec"]["template"]["spec"]
    (web,) = spec["containers"]
    assert web["image"] == container["image"]
    assert web["command"] == ["python", "-m", "http.server", "8080", "--directory", "/archive"]
    assert web["volumeMounts"] == [{"name": "archive", "mountPath": "/archive", "readOnly": True}]
    assert spec["volumes"][0]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert service["spec"]["selector"] == server["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": "http"}]
    (term,) = pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert (
        term["labelSelector"]["matchLabels"].items()
        <= server["spec"]["template"]["metadata"]["labels"].items()
    )


# --- docs/deploy.md's worked overlay ------------------------------------------------------------------
DEPLOY_DOC = ROOT / "docs" / "deploy.md"


def docs_overlay() -> tuple[str, str]:
    """docs/deploy.md's worked overlay: the namespace its ``tritonwatch k8s`` command generates for, and
    the YAML block that starts ``# my-cluster/kustomization.yaml``."""
    text = DEPLOY_DOC.read_text()
    blocks = re.findall(r"```yaml\n(# my-cluster/kustomization\.yaml\n.*?)```", text, re.DOTALL)
    assert len(blocks) == 1, "docs/deploy.md: one worked overlay"
    before = text[: text.index(blocks[0])]
    (namespace,) = re.findall(r"tritonwatch k8s [^`]*?--namespace (\S+)", before.rsplit("```text", 1)[1])
    return namespace, blocks[0]


def test_the_docs_overlay_scales_on_the_namespace_it_deploys_to(tmp_path: Path) -> None:
    """The docs' overlay, generated as the docs say: every object in the namespace asked for, and the
    autoscaler's query reading that namespace (an overlay's own ``namespace:`` would have moved the
    ScaledObject and left its query on the old one)."""
    need_binary("kubectl")
    namespace, overlay = docs_overlay()
    assert namespace == "inference"
    argv = ["--slo", str(SLO_FILE), "--dashboards", str(DASHBOARDS_DIR), "--namespace", namespace]
    assert (
        k8s.main(
            [*argv, "--base", str(tmp_path / "kubernetes"), "--autoscaling", str(tmp_path / "autoscaling")]
        )
        == 0
    )
    (tmp_path / "my-cluster").mkdir()
    (tmp_path / "my-cluster" / "kustomization.yaml").write_text(overlay)
    out = subprocess.run(
        ["kubectl", "kustomize", str(tmp_path / "my-cluster")], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    docs = load_all(out.stdout)
    assert {d["metadata"].get("namespace") for d in docs if d["kind"] != "Namespace"} == {namespace}
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"] == [namespace]
    (scaled,) = [d for d in docs if d["kind"] == "ScaledObject"]
    query = scaled["spec"]["triggers"][0]["metadata"]["query"]
    read = re.findall(r'namespace="([^"]*)"', query)
    assert len(read) >= 2 and set(read) == {namespace}, read
    (am,) = [d for d in docs if d["kind"] == "AlertmanagerConfig"]
    assert {r["name"] for r in am["spec"]["receivers"] if r.get("webhookConfigs")} == {
        "default",
        "page",
        "ticket",
    }
    assert all(d["metadata"]["labels"]["release"] == "kube-prometheus-stack" for d in docs)
