"""Where the generated rules run (``tritonwatch.alerts.layers``): the replica layer on every scraping
Prometheus, the global layer once over the whole fleet. The live proof is tests/test_fleet_topology.py
(the replica layer on two hashmod shards, the global layer on vmalert); here, what makes a rule safe
on a shard is checked on every rule generated for the bundled SLO file and for one with a grouping."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tritonwatch import catalog, slo
from tritonwatch.alerts import generate, layers, rulefiles, rules
from tritonwatch.alerts.model import Alert

ROOT = Path(__file__).resolve().parent.parent
SLO_FILE = ROOT / "alerts" / "slo.yaml"


def _spec(grouping: list[str] | None = None) -> slo.SLOFile:
    doc = yaml.safe_load(SLO_FILE.read_text())
    if grouping:
        doc["spec"]["grouping"] = grouping
    return slo.parse(doc)


SPECS = {"bundled": _spec(), "cluster": _spec(["cluster"])}


# (alert, its "cause" label or None): the alerts whose every result reads one target's series.
PER_TARGET = [
    (catalog.GPU_MEMORY_NEAR_FULL_ALERT, None),  # one sidecar's gauge per GPU, no aggregation
    (catalog.GPU_XID_ALERT, None),  # likewise
    (catalog.MODEL_NOT_READY_ALERT, None),  # min by (model, version, instance) of one sidecar
    (catalog.SERVER_DOWN_ALERT, "scrape_failed"),  # up == 0 of one target (not the absent() one)
    (catalog.SIDECAR_STALE_ALERT, None),  # max by (instance, target) of one sidecar
]


def _replica(name: str) -> list[dict[str, Any]]:
    return [r for g in rules.rule_files(SPECS[name])[layers.REPLICA_FILE]["groups"] for r in g["rules"]]


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_rule_is_in_exactly_one_layer(name: str) -> None:
    """The layer is decided where a group is built: the per-target alerts' group is tagged replica and
    is the replica file, every other group is global and in another file."""
    groups = rules.groups(SPECS[name])
    replica = [g for g in groups if g.layer == layers.REPLICA]
    assert [g.name for g in replica] == [layers.REPLICA_GROUP]
    moved = sorted((r.name, r.label("cause")) for r in replica[0].rules if isinstance(r, Alert))
    assert moved == PER_TARGET and len(replica[0].rules) == len(PER_TARGET)
    files = rulefiles.by_file(groups)
    assert files[layers.REPLICA_FILE] == replica
    assert all(g.layer == layers.GLOBAL for f, gs in files.items() if f != layers.REPLICA_FILE for g in gs)
    # every rule once
    assert sum(len(g.rules) for g in groups) == sum(len(g.rules) for gs in files.values() for g in gs)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_replica_rules_read_one_targets_series(name: str) -> None:
    """A rule is safe on a shard when each result reads one target's series: every aggregation keeps
    ``instance`` (a target is on one shard), no ``absent()`` (a shard with no target of the kind would
    page), no recorded series (the records are the global layer's, fleet-wide)."""
    replica = _replica(name)
    assert replica
    for rule in replica:
        expr = rule["expr"]
        assert "absent(" not in expr, rule["alert"]
        assert not re.search(r"\b\w+:\w+:\w+", expr), rule["alert"]  # level:metric:operations
        for agg in re.finditer(r"\b(?:sum|min|max|avg|count)\s+(by|without)\s*\(([^)]*)\)", expr):
            assert agg.group(1) == "by" and "instance" in agg.group(2).replace(" ", "").split(","), rule
        # An aggregation without a by clause would merge targets.
        assert not re.search(r"\b(?:sum|min|max|avg|count)\s*\(", expr), rule["alert"]


def test_global_layer_holds_every_fleet_aggregation() -> None:
    """Every record and every rule that sums by model (without instance) is in the global layer."""
    split = rules.rule_files(SPECS["bundled"])
    for file, doc in split.items():
        for group in doc["groups"]:
            for rule in group["rules"]:
                fleet_wide = "record" in rule or re.search(r"by \(model, version\)", rule["expr"])
                if fleet_wide:
                    assert layers.layer_of(file) == layers.GLOBAL, (file, rule.get("record") or rule["alert"])
    assert catalog.SLO_BURN_ALERT in {
        r.get("alert") for g in split["model-fraud_detector.rules.yml"]["groups"] for r in g["rules"]
    }


def test_each_file_names_its_layer() -> None:
    files = generate.render(str(SLO_FILE))
    for name, text in files.items():
        if name.endswith(".rules.yml"):
            third = text.splitlines()[2]
            assert third == layers.comment(name).rstrip("\n"), name
            assert third.startswith(f"# layer: {layers.layer_of(name)} ")
    assert layers.layer_of("replica.rules.yml") == layers.REPLICA
    assert {layers.layer_of(n) for n in files if n.endswith(".rules.yml") and n != "replica.rules.yml"} == {
        layers.GLOBAL
    }
