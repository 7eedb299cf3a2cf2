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
one that keeps ``instance``: ``rules.operational_alerts`` builds them into their own group, tagged with
this layer (``alerts/model.py``). They run next to the scrape, so they fire even when remote
write to the global store is broken, and each fires once: a target is scraped by exactly one shard.

The layers are files, not a key inside them: Prometheus and vmalert refuse unknown keys in a rule
group, and Prometheus 2.42 has no group labels. ``replica.rules.yml`` is the replica layer; the other
rule files are the global layer. Each file's header says which.
"""

from __future__ import annotations

REPLICA = "replica"
GLOBAL = "global"
LAYERS = (REPLICA, GLOBAL)
REPLICA_FILE = "replica.rules.yml"
REPLICA_GROUP = "tritonwatch-replica"

COMMENT = {
    REPLICA: "# layer: replica - load on every Prometheus that scrapes Tritons and sidecars "
    "(each shard); each rule reads one target's series.\n",
    GLOBAL: "# layer: global - load once where the whole fleet is visible (vmalert, Thanos Ruler, "
    "Mimir ruler, or a single Prometheus); rules aggregate across replicas.\n",
}


def layer_of(filename: str) -> str:
    """The layer of a generated rule file, by its name."""
    return REPLICA if filename == REPLICA_FILE else GLOBAL


def comment(filename: str) -> str:
    """The header line naming a rule file's layer."""
    return COMMENT[layer_of(filename)]
