"""PrometheusRules, dashboard ConfigMaps and the Alertmanager Secret, from the generated files.

Rules: no object grows with the fleet. Each rule about one model (tagged so when built, ``alerts/model.py``:
the per-model SLO groups and the per-model operational alerts) goes to that model's PrometheusRule,
``tritonwatch-model-<model>``; what aggregates the fleet stays whole in ``tritonwatch-global`` (the
catalog records, the fleet-wide operational alerts, rule files others generated) and
``tritonwatch-replica``. A group whose rules
are split keeps its name for the fleet-wide part and becomes ``<group>-<model>`` for a model's part.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from tritonwatch import safeyaml
from tritonwatch.alerts import layers, rulefiles
from tritonwatch.alerts.model import Group, Rule
from tritonwatch.deploy.render import PART_OF, dns_name, labels
from tritonwatch.errors import UsageError

DASHBOARD_LABEL = {"grafana_dashboard": "1"}
LAYER_LABEL = "tritonwatch.io/layer"
MODEL_ANNOTATION = "tritonwatch.io/model"
# kube-prometheus-stack's Grafana sidecar (grafana.sidecar.dashboards.folderAnnotation) puts a
# dashboard in the folder this annotation names.
FOLDER_ANNOTATION = "grafana_folder"
DASHBOARD_FOLDER = {FOLDER_ANNOTATION: "tritonwatch"}
ALERTMANAGER_NAME = "tritonwatch"


def read_rules(path: Path) -> list[dict[str, Any]]:
    try:
        data = safeyaml.load(path.read_text())
    except OSError as exc:
        raise UsageError(f"--rules: cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not valid YAML ({safeyaml.problem(exc)})") from None
    if not isinstance(data, dict) or not isinstance(data.get("groups"), list):
        raise UsageError(f"{path}: expected a Prometheus rule file with a list of groups")
    return list(data["groups"])


def _rule(name: str, layer: str, groups: list[Any], model: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {**labels("rules"), LAYER_LABEL: layer}}
    if model is not None:
        meta["annotations"] = {MODEL_ANNOTATION: model}
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": meta,
        "spec": {"groups": groups},
    }


def prometheus_rules(groups: list[Group], foreign: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """``tritonwatch-replica``, ``tritonwatch-global``, then one ``tritonwatch-model-<model>`` per model
    (sorted), each labelled with its layer: each rule goes where its group's (or its own) tags say
    (``alerts/model.py``); ``foreign`` groups (rule files others generated) stay whole in the global one."""
    fleet: dict[str, list[Any]] = {layer: [] for layer in layers.LAYERS}
    per_model: dict[str, list[Any]] = {}
    for group in (g for gs in rulefiles.by_file(groups).values() for g in gs):
        split: dict[str | None, list[Rule]] = {}
        for rule in group.rules:
            split.setdefault(group.model_of(rule) if group.layer == layers.GLOBAL else None, []).append(rule)
        whole = len(split) == 1
        for key, rules in split.items():
            if key is None:
                fleet[group.layer].append(group.with_rules(tuple(rules)).to_yaml())
            else:
                name = group.name if whole else f"{group.name}-{key}"
                per_model.setdefault(key, []).append(group.with_rules(tuple(rules), name).to_yaml())
    fleet[layers.GLOBAL] += foreign
    out = [_rule(f"tritonwatch-{layer}", layer, gs) for layer, gs in fleet.items() if gs]
    out += [
        _rule(f"tritonwatch-model-{dns_name(model)}", layers.GLOBAL, gs, model)
        for model, gs in sorted(per_model.items())
    ]
    return out


def dashboard_configmaps(dashboards_dir: Path) -> list[dict[str, Any]]:
    docs = []
    for path in sorted(dashboards_dir.glob("*.json")):
        text = path.read_text()
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise UsageError(f"{path}: not valid JSON ({exc})") from None
        if isinstance(data, dict) and "apiVersion" in data and "spec" in data:
            # Grafana's dashboard sidecar loads classic dashboard JSON; a resource would be refused there.
            raise UsageError(
                f"{path}: a Grafana resource ({data['apiVersion']}), not a classic dashboard: "
                f"write the ConfigMaps' dashboards with `tritonwatch dashboards --format json`"
            )
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": f"tritonwatch-dashboard-{dns_name(path.stem)}",
                    "labels": {**PART_OF, "app.kubernetes.io/component": "dashboards", **DASHBOARD_LABEL},
                    "annotations": DASHBOARD_FOLDER,
                },
                "data": {path.name: text},
            }
        )
    if not docs:
        raise UsageError(
            f"--dashboards {dashboards_dir}: no *.json files (run: tritonwatch dashboards --out {dashboards_dir})"
        )
    return docs


def alertmanager_secret(text: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"alertmanager-{ALERTMANAGER_NAME}", "labels": labels("alertmanager")},
        "type": "Opaque",
        "stringData": {"alertmanager.yaml": text},
    }
