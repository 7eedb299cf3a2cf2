"""The rules ``tritonwatch k8s`` packs: generated from the SLO file with ``namespace`` in the grouping.

The Prometheus Operator merges an ``AlertmanagerConfig`` under a top route that matches
``namespace="<its namespace>"`` (``alertmanagerConfigMatcherStrategy`` ``OnNamespace``, its default):
an alert without that label never reaches the config's receivers, and kube-prometheus-stack's own
route sends it to the receiver ``null``. The SLO and fleet rules aggregate ``by (model, version,
<grouping>)``, so unless the SLO file's ``spec.grouping`` names ``namespace`` every page would be lost
there. On Kubernetes the PodMonitor's ``namespace`` label is on every scraped series, so the rules
``tritonwatch k8s`` packs are generated here from the SLO file with ``namespace`` added to its grouping
(kept by every ``sum by``, never a ``without``), and the Alertmanager config groups and inhibits by it.

Hand-written rule files in ``--rules`` (files not written by ``tritonwatch rules``) are packed as they are;
the generated ones there are made afresh from the typed model, never read back.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from tritonwatch.alerts import alertmanager, generate, rulefiles, rules, windows
from tritonwatch.alerts.model import Alert, Group
from tritonwatch.deploy.manifests import read_rules
from tritonwatch.errors import UsageError
from tritonwatch.files import written_by
from tritonwatch.slo import SLOFile

NAMESPACE_LABEL = "namespace"


def for_operator(spec: SLOFile, slo_path: Path) -> SLOFile:
    """The SLO file with ``namespace`` in its grouping (where it is not already), its budgets checked."""
    grouped = dataclasses.replace(spec, grouping=tuple(dict.fromkeys([*spec.grouping, NAMESPACE_LABEL])))
    try:
        windows.check_budgets(grouped)
    except UsageError as exc:
        raise UsageError(f"--slo {slo_path}: {exc}") from None
    return grouped


def hand_written(rules_dir: Path | None) -> list[dict[str, Any]]:
    """The groups of the ``*.rules.yml`` in ``rules_dir`` that ``tritonwatch rules`` did not write (the
    folder is a contract for rule files others generate); ours there are made afresh from ``--slo``."""
    if rules_dir is None:
        return []
    if not rules_dir.is_dir():
        raise UsageError(f"--rules {rules_dir}: not a directory")
    groups: list[dict[str, Any]] = []
    for path in sorted(rules_dir.glob("*.rules.yml")):
        if not written_by(path, generate.MARKER):
            groups += read_rules(path)
    return groups


def groups(packed: SLOFile, namespace: str) -> list[Group]:
    """The typed rule groups for ``packed``; an alert whose result cannot carry ``namespace`` (``absent()``,
    ``vector()``: a Triton target gone, the sidecar gone, no SLI data, the watchdog) gets the
    deployment's as a static label, so the operator's namespace route takes it too."""
    out = []
    for group in rules.groups(packed):
        fixed = tuple(
            r.labelled(**{NAMESPACE_LABEL: namespace}) if isinstance(r, Alert) and not r.grouped else r
            for r in group.rules
        )
        out.append(group.with_rules(fixed))
    return out


def rule_documents(packed: SLOFile, namespace: str) -> dict[str, dict[str, Any]]:
    """Rule file name -> document, as ``tritonwatch k8s`` packs them for ``packed``."""
    return rulefiles.documents(groups(packed, namespace))


def alertmanager_text(packed: SLOFile, slo_path: Path, command: str) -> str:
    """The plain Alertmanager configuration for ``packed`` (the Secret's ``alertmanager.yaml``)."""
    return generate.dump(alertmanager.config(packed), generate.header(str(slo_path), packed.name, command))
