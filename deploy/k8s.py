"""``tritonwatch k8s``: wrap the generated rules, Alertmanager config and dashboards as Kubernetes
objects, and write the autoscaling and Triton 2.65+ overlays' generated files.

    tritonwatch k8s --rules alerts/generated --dashboards dashboards/generated --slo alerts/slo.yaml \\
        --out deploy/kubernetes/generated [--autoscaling deploy/autoscaling] [--triton265 deploy/triton265]

Reads ``--rules`` (what ``tritonwatch rules`` wrote) and ``--dashboards`` (what ``tritonwatch
dashboards`` wrote), so the cluster gets exactly what Prometheus and Grafana get in compose/, and the
operator's own SLO file (``--slo``, required: the sidecars' ConfigMap and the split of the rules by
model come from it). Writes, byte-for-byte reproducible:

    prometheusrules.yaml        monitoring.coreos.com/v1 PrometheusRules, labelled tritonwatch.io/layer:
                                tritonwatch-replica, tritonwatch-global (the fleet's aggregation, whole)
                                and one tritonwatch-model-<model> per model (deploy/manifests.py)
    dashboards.yaml             one ConfigMap per dashboard, labelled grafana_dashboard: "1" and
                                annotated grafana_folder: tritonwatch for Grafana's dashboard sidecar
    alertmanagerconfig.yaml     AlertmanagerConfig tritonwatch (monitoring.coreos.com/v1alpha1), the
                                routing tree kube-prometheus-stack's Alertmanager merges (deploy/amconfig.py)
    alertmanager-secret.yaml    Secret alertmanager-tritonwatch, key alertmanager.yaml: the plain config,
                                for an operator-managed Alertmanager named tritonwatch of your own
    report-cronjob.yaml         the weekly capacity report on a schedule: a CronJob and its archive's
                                claim (deploy/report.py)

and with ``--autoscaling DIR`` the overlays' SLO ConfigMap, KEDA ScaledObject, HPA and adapter values
(deploy/scaling.py); with ``--triton265 DIR`` the ConfigMap of the models' ``model_metrics`` stanzas.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from pathlib import Path
from typing import NoReturn

from tritonwatch import slo as slo_model
from tritonwatch import validators
from tritonwatch.alerts import alertmanager
from tritonwatch.alerts import rules as alert_rules
from tritonwatch.deploy import amconfig, manifests, report, scaling
from tritonwatch.deploy.render import ANNOTATIONS_LIMIT, COMMAND, dump, labels, last_applied_bytes
from tritonwatch.errors import TritonwatchError, UsageError
from tritonwatch.flags import command_line

log = logging.getLogger(__name__)

HELP = "wrap the generated rules, Alertmanager config and dashboards as Kubernetes manifests"

RULES_FILE = "prometheusrules.yaml"
DASHBOARDS_FILE = "dashboards.yaml"
ALERTMANAGER_FILE = "alertmanager-secret.yaml"
AMCONFIG_FILE = "alertmanagerconfig.yaml"
REPORT_FILE = "report-cronjob.yaml"
MODEL_METRICS_FILE = "native-latency/model-metrics.yaml"
MODEL_METRICS_CONFIGMAP = "tritonwatch-model-metrics"
STANZA_SUFFIX = ".model_metrics.pbtxt"
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")  # DNS-1123 label


def load_slo(path: Path) -> tuple[slo_model.SLOFile, str]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise UsageError(f"--slo: cannot read {path}: {exc.strerror}") from None
    try:
        return slo_model.load(path), text
    except TritonwatchError as exc:
        raise UsageError(f"--slo: {exc}") from None


def render_all(
    rules_dir: Path, dashboards_dir: Path, spec: slo_model.SLOFile, command: str = COMMAND
) -> dict[str, str]:
    """File name -> exact text of every manifest in ``--out``; ``command``: the command line run."""
    for flag, d in (("--rules", rules_dir), ("--dashboards", dashboards_dir)):
        if not d.is_dir():
            raise UsageError(f"{flag} {d}: not a directory")
    groups = alert_rules.groups(spec)
    rules = manifests.prometheus_rules(groups, manifests.foreign_rules(rules_dir, groups))
    am_text = manifests.alertmanager_text(rules_dir)
    am = alertmanager.typed_config(spec)
    left_out = amconfig.integrations_left_out(am)
    if left_out:
        log.warning(
            "%s: receivers %s keep their integrations in the plain config only (an AlertmanagerConfig "
            "takes secrets as Secret references): add them with an overlay",
            AMCONFIG_FILE,
            ", ".join(left_out),
        )
    note = (
        f"# Receivers {', '.join(left_out)}: their integrations are in alertmanager-secret.yaml (*_file "
        "secrets); add them here as Secret references in an overlay.\n"
        if left_out
        else ""
    )
    dashboards = manifests.dashboard_configmaps(dashboards_dir)
    for doc in [*rules, *dashboards]:
        if (size := last_applied_bytes(doc)) > ANNOTATIONS_LIMIT:
            raise UsageError(
                f"{doc['kind']} {doc['metadata']['name']}: {size} bytes once applied, over the "
                f"{ANNOTATIONS_LIMIT} Kubernetes stores in an object's annotations (kubectl apply)"
            )
    # The header's first line names the inputs by their usual place; its "Regenerate:" line is the
    # command as run, with its own paths.
    return {
        RULES_FILE: dump(rules, "alerts/generated/*.rules.yml", command=command),
        DASHBOARDS_FILE: dump(dashboards, "dashboards/generated/*.json", command=command),
        AMCONFIG_FILE: dump(
            [amconfig.alertmanager_config(am)], "alerts/generated/alertmanager.yml", note, command
        ),
        ALERTMANAGER_FILE: dump(
            [manifests.alertmanager_secret(am_text)], "alerts/generated/alertmanager.yml", command=command
        ),
        REPORT_FILE: dump(
            report.manifests(scaling.PROMETHEUS_URL), "tritonwatch/deploy/report.py", command=command
        ),
    }


def model_metrics(rules_dir: Path, command: str = COMMAND) -> dict[str, str]:
    """The Triton 2.65+ overlay's ConfigMap: every ``<model>.model_metrics.pbtxt`` ``rules`` wrote."""
    stanzas = {p.name: p.read_text() for p in sorted((rules_dir / "triton").glob(f"*{STANZA_SUFFIX}"))}
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": MODEL_METRICS_CONFIGMAP, "labels": labels("triton")},
        "data": stanzas,
    }
    return {
        MODEL_METRICS_FILE: dump(
            [configmap], "alerts/generated/triton/*.model_metrics.pbtxt", command=command
        )
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for flag, default, metavar, text in (
        ("--rules", "alerts/generated", "DIR", "what `tritonwatch rules` wrote"),
        ("--dashboards", "dashboards/generated", "DIR", "what `tritonwatch dashboards` wrote"),
        ("--out", "deploy/kubernetes/generated", "DIR", "where the manifests go"),
    ):
        parser.add_argument(flag, type=Path, default=Path(default), metavar=metavar, help=text)
    parser.add_argument(
        "--slo", type=Path, required=True, metavar="FILE",
        help="the SLO file (apiVersion tritonwatch/v1) your sidecars and rules use: the sidecars' ConfigMap, "
        "the rules' split by model",
    )  # fmt: skip
    parser.add_argument(
        "--namespace", default=scaling.NAMESPACE, metavar="NS",
        help=f"the namespace the Triton Deployment runs in: the autoscalers' query reads it (default: {scaling.NAMESPACE})",
    )  # fmt: skip
    parser.add_argument(
        "--autoscaling", type=Path, default=None, metavar="DIR",
        help="also write the autoscaling overlays' generated files there (make generate: deploy/autoscaling)",
    )  # fmt: skip
    parser.add_argument(
        "--triton265", type=Path, default=None, metavar="DIR",
        help="also write the Triton 2.65+ overlay's model_metrics ConfigMap there (make generate: deploy/triton265)",
    )  # fmt: skip


def _write(base: Path, files: dict[str, str], flag: str) -> None:
    try:
        for name, text in files.items():
            (base / name).parent.mkdir(parents=True, exist_ok=True)
            (base / name).write_text(text)
    except OSError as exc:
        raise UsageError(f"{flag} {base}: cannot write ({exc.strerror})") from None


def run(args: argparse.Namespace) -> int:
    out: Path = args.out
    for flag, d in (("--out", out), ("--autoscaling", args.autoscaling), ("--triton265", args.triton265)):
        if d is not None and d.exists() and not d.is_dir():
            raise UsageError(f"{flag} {d}: exists and is not a directory")
    validators.fullmatch(_NAMESPACE, args.namespace, "--namespace", "not a Kubernetes namespace name")
    spec, slo_text = load_slo(args.slo)
    command = getattr(args, "command_line", COMMAND)
    files = render_all(args.rules, args.dashboards, spec, command)
    scaling_files = scaling.autoscaling(spec, slo_text, args.namespace, command) if args.autoscaling else {}
    native = model_metrics(args.rules, command) if args.triton265 else {}
    _write(out, files, "--out")
    print(f"wrote {len(files)} manifests to {out}: {', '.join(sorted(files))}")
    for flag, base, written in (
        ("--autoscaling", args.autoscaling, scaling_files),
        ("--triton265", args.triton265, native),
    ):
        if written:
            _write(base, written, flag)
            print(f"wrote {len(written)} files to {base}: {', '.join(sorted(written))}")
    return 0


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line, like the CLI's (argparse prints the usage too, then exits)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def main(argv: list[str] | None = None) -> int:
    """``tritonwatch k8s`` without the rest of the CLI (deploy/kubernetes/generate.py calls it)."""
    parser = _Parser(prog="tritonwatch k8s", description=HELP)
    add_arguments(parser)
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parser.parse_args(argv)
        args.command_line = command_line(["k8s", *argv])  # this parser mirrors no environment variable
        return run(args)
    except UsageError as exc:
        print(f"tritonwatch k8s: error: {exc}", file=sys.stderr)
        return exc.exit_code
