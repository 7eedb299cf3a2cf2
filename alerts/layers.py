"""Where each generated rule runs: on every Prometheus that scrapes (``replica``) or once, where the
whole fleet is visible (``global``: vmalert, Thanos Ruler, Mimir ruler, or the one Prometheus of a
single-Prometheus setup, which loads both layers).

A rule belongs to the replica layer only if each of its results reads the series of one scrape target
and nothing else: then any Prometheus that scrapes that target computes it exactly, whichever other
targets it holds. With hashmod sharding a model's replicas land on different shards, so every rule
that aggregates across replicas (``sum by (model, version)``: every catalog record, every SLO rule and
burn alert, the per-model operational alerts reading those records) sees a partial fleet on a shard:
a partial rate, a ratio of partial sums, one burn page per shard. The same holds for a per-GPU rule
joining a Triton target's counters with the DCGM exporter's (two targets, possibly two shards), for
the stall alerts (they read the fleet's stall-window record), and for an ``absent()`` alert: a shard
that happens to hold no Triton target would page "no target" while the others hold them all.

What is left for the replica layer are the alerts on one target's own series, with no aggregation or
one that keeps ``instance`` (``PER_TARGET``). They run next to the scrape, so they fire even when remote
write to the global store is broken, and each fires once: a target is scraped by exactly one shard.

The layers are files, not a key inside them: Prometheus and vmalert refuse unknown keys in a rule
group, and Prometheus 2.42 has no group labels. ``replica.rules.yml`` is the replica layer; the other
rule files are the global layer. Each file's header says which.
"""

from __future__ import annotations

import copy
from typing import Any

from tritonwatch import catalog

REPLICA = "replica"
GLOBAL = "global"
LAYERS = (REPLICA, GLOBAL)
REPLICA_FILE = "replica.rules.yml"
REPLICA_GROUP = "tritonwatch-replica"
SOURCE_FILE = "operational.rules.yml"  # where the per-target alerts are generated

# (alert, its "cause" label or None): the alerts whose every result reads one target's series.
PER_TARGET: frozenset[tuple[str, str | None]] = frozenset(
    {
        (catalog.SERVER_DOWN_ALERT, "scrape_failed"),  # up == 0 of one target (not the absent() one)
        (catalog.MODEL_NOT_READY_ALERT, None),  # min by (model, version, instance) of one sidecar
        (catalog.GPU_MEMORY_NEAR_FULL_ALERT, None),  # one sidecar's gauge per GPU, no aggregation
        (catalog.GPU_XID_ALERT, None),  # likewise
        (catalog.SIDECAR_STALE_ALERT, None),  # max by (instance, target) of one sidecar
    }
)

COMMENT = {
    REPLICA: "# layer: replica - load on every Prometheus that scrapes Tritons and sidecars "
    "(each shard); each rule reads one target's series.\n",
    GLOBAL: "# layer: global - load once where the whole fleet is visible (vmalert, Thanos Ruler, "
    "Mimir ruler, or a single Prometheus); rules aggregate across replicas.\n",
}

Files = dict[str, dict[str, list[dict[str, Any]]]]


def layer_of(filename: str) -> str:
    """The layer of a generated rule file, by its name."""
    return REPLICA if filename == REPLICA_FILE else GLOBAL


def comment(filename: str) -> str:
    """The header line naming a rule file's layer."""
    return COMMENT[layer_of(filename)]


def _per_target(rule: dict[str, Any]) -> bool:
    name = rule.get("alert")
    cause = rule.get("labels", {}).get("cause")
    return (name, cause) in PER_TARGET


def split(files: Files) -> Files:
    """``rules.rule_files()`` with the per-target alerts moved into ``replica.rules.yml``; every rule
    is in exactly one file, in the order it was generated."""
    out = copy.deepcopy(files)
    moved: list[dict[str, Any]] = []
    for group in out.get(SOURCE_FILE, {}).get("groups", []):
        moved += [r for r in group["rules"] if _per_target(r)]
        group["rules"] = [r for r in group["rules"] if not _per_target(r)]
    if moved:
        out[REPLICA_FILE] = {"groups": [{"name": REPLICA_GROUP, "rules": moved}]}
    return dict(sorted(out.items()))
