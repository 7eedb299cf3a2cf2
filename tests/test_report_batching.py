"""Splitting the report's per-model queries by model (``--models-per-query``): which selectors get the
model matcher. That the split report equals the whole one is shown against a real Prometheus in
tests/test_report_prometheus.py; here, each kind of selector the report's queries hold."""

from __future__ import annotations

import re

from tritonwatch import catalog
from tritonwatch.reports import batching
from tritonwatch.reports import queries as q

M = 'model=~"a|b"'


def test_batches_are_sorted_and_bounded() -> None:
    names = [f"m{i:02d}" for i in range(7)][::-1]
    assert list(batching.batches(names, 3)) == [["m00", "m01", "m02"], ["m03", "m04", "m05"], ["m06"]]
    assert list(batching.batches(names, 0)) == [sorted(names)]
    assert list(batching.batches([], 3)) == []


def test_model_names_match_literally() -> None:
    # RE2 metacharacters escaped, then the backslashes escaped again for the PromQL string.
    assert batching.model_matcher(["resnet.v2", "a+b", "x-y"]) == r'model=~"resnet\\.v2|a\\+b|x-y"'


def test_per_model_selectors_get_the_matcher_and_others_do_not() -> None:
    assert batching.restrict("sum by (model) (rate(nv_inference_count[5m]))", ["a", "b"]) == (
        f"sum by (model) (rate(nv_inference_count{{{M}}}[5m]))"
    )
    # An existing matcher list is extended, string literals with braces are left as they are.
    assert batching.restrict('nv_inference_request_failure{reason!~"x}{"}', ["a", "b"]) == (
        f'nv_inference_request_failure{{reason!~"x}}{{",{M}}}'
    )
    # Recorded series and the sidecar's histogram and gauges carry the model label.
    for name in (catalog.REQUEST_RATE_RECORD, f"{catalog.REQUEST_DURATION}_bucket", catalog.MAX_BATCH_SIZE):
        assert batching.restrict(name, ["a", "b"]) == f"{name}{{{M}}}"
    # GPU series have no model label: a matcher there would empty the query.
    gpu = q.gpu_utilization()
    assert batching.restrict(gpu, ["a", "b"]) == gpu


def test_every_selector_of_the_reports_per_model_queries_is_narrowed() -> None:
    exprs = [
        q.successes("7d"),
        q.server_failures("7d"),
        q.error_ratio("7d"),
        q.figure(catalog.signal(catalog.QUEUE_TIME_RATIO), "7d"),
        q.latency_quantile(0.99, "7d"),
        q.model_gpus("7d"),
        q.gpu_busy_seconds("7d"),
        q.batch_efficiency("1h"),
        q.latency_within(0.1),
    ]
    for expr in exprs:
        narrowed = batching.restrict(expr, ["a", "b"])
        selectors = re.findall(r"(?<![\w:])((?:nv_|tritonwatch_|model:)[\w:]*)(\{[^}]*\})?", narrowed)
        assert selectors, expr
        for name, matchers in selectors:
            assert M in matchers, (name, expr)
        assert narrowed.count(M) == len(selectors)
