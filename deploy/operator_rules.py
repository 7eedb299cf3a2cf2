"""The rules ``tritonwatch k8s`` packs: generated from the SLO file with ``namespace`` in the grouping.

The Prometheus Operator merges an ``AlertmanagerConfig`` under a top route that matches
``namespace="<its namespace>"`` (``alertmanagerConfigMatcherStrategy`` ``OnNamespace``, its default):
an alert without that label never reaches the config's receivers, and kube-prometheus-stack's own
route sends it to the receiver ``null``. The SLO and fleet rules aggregate ``by (model, version,
<grouping>)``, so unless the SLO file's ``spec.grouping`` names ``namespace`` every page would be lost
there. On Kubernetes the PodMonitor's ``namespace`` label is on every scraped series, so the rules
``tritonwatch k8s`` packs are generated here from the SLO file with ``namespace`` added to its grouping
(kept by every ``sum by``, never a ``without``), and the Alertmanager config groups and inhibits by it.

Hand-written rule files in ``--rules`` (files not written by ``tritonwatch rules``) are packed as they are.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from tritonwatch.alerts import alertmanager, generate, layers, model_metrics, rules, windows
from tritonwatch.errors import UsageError
from tritonwatch.files import written_by
from tritonwatch.slo import SLOFile

NAMESPACE_LABEL = "namespace"


def for_operator(spec: SLOFile) -> SLOFile:
    """The SLO file with ``namespace`` in its grouping (where it is not already)."""
    return dataclasses.replace(spec, grouping=tuple(dict.fromkeys([*spec.grouping, NAMESPACE_LABEL])))


def rule_files(spec: SLOFile, slo_path: Path) -> dict[str, str]:
    """Relative path -> text: the rule files, ``alertmanager.yml`` and the ``triton/`` stanzas, as
    ``tritonwatch rules`` writes them for ``for_operator(spec)`` (its promtool tests left out)."""
    grouped = for_operator(spec)
    try:
        windows.check_budgets(grouped)
    except UsageError as exc:
        raise UsageError(f"--slo {slo_path}: {exc}") from None
    top = generate.header(str(slo_path), grouped.name)
    split = layers.split(rules.rule_files(grouped))
    files = {name: generate.dump(doc, top + layers.comment(name)) for name, doc in split.items()}
    files["alertmanager.yml"] = generate.dump(alertmanager.config(grouped), top)
    files.update({name: top + text for name, text in model_metrics.stanza_files(grouped).items()})
    return dict(sorted(files.items()))


def write_rules_dir(spec: SLOFile, slo_path: Path, rules_dir: Path | None, into: Path) -> Path:
    """Fill ``into`` (an empty folder) with ``rule_files`` and the hand-written ``*.rules.yml`` of
    ``rules_dir`` (None: none); returns ``into``, a folder ``render_all`` reads as a rules folder."""
    if rules_dir is not None and not rules_dir.is_dir():
        raise UsageError(f"--rules {rules_dir}: not a directory")
    for rel, text in rule_files(spec, slo_path).items():
        (into / rel).parent.mkdir(parents=True, exist_ok=True)
        (into / rel).write_text(text)
    for path in sorted(rules_dir.glob("*.rules.yml")) if rules_dir is not None else ():
        if written_by(path, generate.MARKER):
            continue
        if (into / path.name).exists():
            raise UsageError(f"--rules {path}: a hand-written file with a generated file's name")
        shutil.copyfile(path, into / path.name)
    return into
