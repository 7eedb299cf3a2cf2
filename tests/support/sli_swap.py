"""Rules whose SLI of one objective reads another source: what the front tests prove their cases catch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tritonwatch import slo
from tritonwatch.alerts import rules


def read_by_triton(rule_file: Path, slo_file: Path, model: str, kind: str) -> None:
    """Rewrite ``rule_file`` so that ``model``'s ``kind`` SLI reads Triton's (or the sidecar's) series
    instead of its front's: its SLI records replaced by those of the same SLO file without ``from``."""
    doc = yaml.safe_load(slo_file.read_text())
    entry = next(s for s in doc["spec"]["slos"] if s["model"] == model)
    del entry[kind]["from"]
    spec = slo.parse(doc)
    obj = next(o for o in spec.objectives() if o.model == model and o.kind == kind)
    generated: dict[str, Any] = yaml.safe_load(rule_file.read_text())
    [group] = [g for g in generated["groups"] if g["name"] == f"tritonwatch-slo-{obj.name}"]
    kept = [r for r in group["rules"] if not r.get("record", "").startswith("slo:sli_")]
    group["rules"] = [r.to_yaml() for r in rules.sli_rules(spec, obj)] + kept
    rule_file.write_text(yaml.safe_dump(generated))
