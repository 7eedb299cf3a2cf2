"""The sidecar's exposition writer says exactly what prometheus_client's generate_latest says."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.parser import text_string_to_metric_families

from tritonwatch.exporters.exposition import exposition


class Families:
    def collect(self):  # type: ignore[no-untyped-def]
        g = GaugeMetricFamily("tw_gauge", "help with \\ backslash\nand newline", labels=["model", "v"])
        g.add_metric(["a", 'quote " back \\ nl \n'], 0.5)
        g.add_metric(["b", "x"], float("nan"))
        g.add_metric(["c", "x"], float("inf"))
        g.add_metric(["d", "x"], 12.0)
        g.add_metric(["e", "x"], 1e-7)
        g.add_metric(["f", "x"], 123456789012345678.0)
        yield g
        c = CounterMetricFamily("tw_things", "counter", labels=["reason"])
        c.add_metric(["x"], 3)
        yield c
        h = HistogramMetricFamily("tw_seconds", "histogram", labels=["phase"])
        h.add_metric(["request"], [("0.005", 1), ("0.01", 3), ("+Inf", 4)], 0.03)
        yield h
        yield GaugeMetricFamily("tw_plain", "no labels", value=-2.5)


def samples(text: str) -> list[tuple[str, tuple[tuple[str, str], ...], str]]:
    out = []
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.append((s.name, tuple(sorted(s.labels.items())), repr(float(s.value))))
    return sorted(out)


def test_same_samples_as_generate_latest() -> None:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(Families())  # type: ignore[arg-type]
    ours, theirs = exposition(reg).decode(), generate_latest(reg).decode()
    assert samples(ours) == samples(theirs)
    assert [ln for ln in ours.splitlines() if ln.startswith("#")] == [
        ln for ln in theirs.splitlines() if ln.startswith("#")
    ]
