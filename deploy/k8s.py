"""``tritonwatch k8s``: the rules, Alertmanager config and dashboards as Kubernetes objects, the
base that deploys them, and the autoscaling and Triton 2.65+ overlays' generated files.

    tritonwatch k8s --slo alerts/slo.yaml --dashboards dashboards/generated \\
        [--out deploy/kubernetes/generated | --base DIR] [--namespace NS] [--rules DIR] \\
        [--autoscaling DIR] [--triton265 DIR]

The rules and the Alertmanager configuration are generated here from the operator's own SLO file
(``--slo``, required), as ``tritonwatch rules`` makes them but with ``namespace`` in the grouping: the
Prometheus Operator routes an AlertmanagerConfig's alerts by their namespace (deploy/operator_rules.py).
``--rules DIR`` adds a folder's hand-written rule files; ``--dashboards`` is what ``tritonwatch
dashboards`` wrote, so the cluster gets the dashboards compose/ gets. Writes, byte-for-byte
reproducible:

    prometheusrules.yaml        monitoring.coreos.com/v1 PrometheusRules, labelled tritonwatch.io/layer:
                                tritonwatch-replica, tritonwatch-global (the fleet's aggregation, whole)
                                and one tritonwatch-model-<model> per model (deploy/manifests.py)
    dashboards.yaml             one ConfigMap per dashboard, labelled grafana_dashboard: "1" and
                                annotated grafana_folder: tritonwatch for Grafana's dashboard sidecar
    alertmanagerconfig.yaml     AlertmanagerConfig tritonwatch (monitoring.coreos.com/v1alpha1), the
                                routing tree kube-prometheus-stack's Alertmanager merges (deploy/amconfig.py);
                                its paging receivers have no integration until an overlay adds one
                                (one warning line says so: deploy/receivers.py)
    alertmanager-secret.yaml    Secret alertmanager-tritonwatch, key alertmanager.yaml: the plain config,
                                for an operator-managed Alertmanager named tritonwatch of your own
    report-cronjob.yaml         the weekly capacity report on a schedule: the SLO file's ConfigMap, the
                                archive's claim and a CronJob (deploy/report.py)

With ``--base DIR`` these go to ``DIR/generated`` and the hand-written base (kustomization, Namespace,
Deployment, Service, PodMonitor) to ``DIR``, from package data (deploy/base.py); with ``--autoscaling
DIR`` the overlays' SLO ConfigMap, KEDA ScaledObject, HPA and adapter values (deploy/scaling.py) and
their kustomizations; with ``--triton265 DIR`` the ConfigMap of the models' ``model_metrics`` stanzas
and its kustomizations. Every kustomization is in ``--namespace``, the namespace the autoscalers read.
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
from tritonwatch.alerts import model_metrics as stanzas
from tritonwatch.deploy import amconfig, base, manifests, operator_rules, receivers, report, scaling
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
DEFAULT_OUT = Path("deploy/kubernetes/generated")
MODEL_METRICS_FILE = "native-latency/model-metrics.yaml"
MODEL_METRICS_CONFIGMAP = "tritonwatch-model-metrics"
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
    rules_dir: Path | None,
    dashboards_dir: Path,
    spec: slo_model.SLOFile,
    slo_text: str,
    slo_path: Path,
    command: str = COMMAND,
    namespace: str = scaling.NAMESPACE,
) -> dict[str, str]:
    """File name -> exact text of every manifest in ``--out``. The rules and the Alertmanager config are
    built from ``spec`` with ``namespace`` in its grouping (deploy/operator_rules.py); ``rules_dir``
    adds its hand-written rule files; ``slo_text`` is the SLO file the report reads; ``command`` the
    command line run."""
    if not dashboards_dir.is_dir():
        raise UsageError(f"--dashboards {dashboards_dir}: not a directory")
    packed = operator_rules.for_operator(spec, slo_path)
    groups = operator_rules.groups(packed, namespace)
    rules = manifests.prometheus_rules(groups, operator_rules.hand_written(rules_dir))
    am_text = operator_rules.alertmanager_text(packed, slo_path, command)
    am = alertmanager.typed_config(packed)
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
    am_doc = amconfig.alertmanager_config(am)
    if (silent := receivers.warning(am_doc, AMCONFIG_FILE)) is not None:
        log.warning("%s", silent)
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
        AMCONFIG_FILE: dump([am_doc], "alerts/generated/alertmanager.yml", note, command),
        ALERTMANAGER_FILE: dump(
            [manifests.alertmanager_secret(am_text)], "alerts/generated/alertmanager.yml", command=command
        ),
        REPORT_FILE: dump(
            report.manifests(scaling.PROMETHEUS_URL, slo_text),
            "tritonwatch/deploy/report.py and the SLO file",
            command=command,
        ),
    }


def model_metrics(spec: slo_model.SLOFile, command: str = COMMAND) -> dict[str, str]:
    """The Triton 2.65+ overlay's ConfigMap: every model's ``<model>.model_metrics.pbtxt`` stanza (the
    file's own header says how to regenerate it)."""
    data = {Path(name).name: text for name, text in sorted(stanzas.stanza_files(spec).items())}
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": MODEL_METRICS_CONFIGMAP, "labels": labels("triton")},
        "data": data,
    }
    return {
        MODEL_METRICS_FILE: dump(
            [configmap], "alerts/generated/triton/*.model_metrics.pbtxt", command=command
        )
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rules", type=Path, default=None, metavar="DIR",
        help="a rules folder: its hand-written *.rules.yml are packed as they are (the generated rules "
        "are made afresh from --slo, with namespace in the grouping)",
    )  # fmt: skip
    parser.add_argument(
        "--dashboards", type=Path, default=Path("dashboards/generated"), metavar="DIR",
        help="what `tritonwatch dashboards` wrote (default: dashboards/generated)",
    )  # fmt: skip
    parser.add_argument(
        "--out", type=Path, default=None, metavar="DIR",
        help=f"where the manifests go, BASE/generated with --base (default: {DEFAULT_OUT})",
    )  # fmt: skip
    parser.add_argument(
        "--base", type=Path, default=None, metavar="DIR",
        help="also write the base there (kustomization, Namespace, Deployment, Service, PodMonitor; "
        "the manifests go to DIR/generated): a tree `kubectl apply -k DIR` takes without a checkout",
    )  # fmt: skip
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


def _out_dir(out: Path | None, base_dir: Path | None) -> Path:
    """``--out``, or where the base's kustomization lists the generated files (``--base``/generated)."""
    if base_dir is None:
        return out or DEFAULT_OUT
    if out is not None and out.resolve() != (base_dir / "generated").resolve():
        raise UsageError(
            f"--out {out}: with --base {base_dir} the manifests go to {base_dir / 'generated'} "
            "(the base's kustomization lists them there); leave --out out"
        )
    return base_dir / "generated"


def run(args: argparse.Namespace) -> int:
    out = _out_dir(args.out, args.base)
    for flag, d in (
        ("--out", out),
        ("--base", args.base),
        ("--autoscaling", args.autoscaling),
        ("--triton265", args.triton265),
    ):
        if d is not None and d.exists() and not d.is_dir():
            raise UsageError(f"{flag} {d}: exists and is not a directory")
    validators.fullmatch(_NAMESPACE, args.namespace, "--namespace", "not a Kubernetes namespace name")
    spec, slo_text = load_slo(args.slo)
    command = getattr(args, "command_line", COMMAND)
    files = render_all(args.rules, args.dashboards, spec, slo_text, args.slo, command, args.namespace)
    ns = args.namespace
    scaling_files = (
        {**scaling.autoscaling(spec, slo_text, ns, command), **base.autoscaling(ns)}
        if args.autoscaling
        else {}
    )
    native = {**model_metrics(spec, command), **base.triton265(ns)} if args.triton265 else {}
    hand_written = base.base(ns) if args.base else {}
    _write(out, files, "--out")
    print(f"wrote {len(files)} manifests to {out}: {', '.join(sorted(files))}")
    for flag, where, written in (
        ("--base", args.base, hand_written),
        ("--autoscaling", args.autoscaling, scaling_files),
        ("--triton265", args.triton265, native),
    ):
        if written:
            _write(where, written, flag)
            print(f"wrote {len(written)} files to {where}: {', '.join(sorted(written))}")
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
