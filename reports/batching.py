"""The report's per-model queries a batch of models at a time (``--models-per-query``).

A query for the whole fleet makes the store load every model's samples at once (an instant query over
``[7d]`` of 15 s counters is 40,320 samples per series: Prometheus refuses one past
``--query.max-samples``, 50 M by default) and answers with every model's series in one body. Split by
model, each query's work and answer are bounded by the batch, whatever the fleet's size.

``restrict(expr, models)`` adds ``model=~"a|b|..."`` to every selector of a per-model family in an
expression (Triton's ``nv_inference_*`` and per-model cache counters, the sidecar's
``tritonwatch_model_*`` and request-duration histogram, and recorded ``model:*`` series), and to no
other: a GPU's series carry no ``model`` label, and a matcher there would empty the query. Every result
of a per-model query depends on that model's series only (``sum by (model, version)``, joins ``on
(model, version)``), so the union of the batches' results is the unbatched result, exactly
(tests/test_report_prometheus.py runs the report both ways). A query that sums across models (a GPU's
total busy time, used to split its power between them) is not batched.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from tritonwatch import catalog
from tritonwatch.validators import promql_string

# Models per query (``--models-per-query``): at 15 s scrapes, 50 models' [7d] counters are 2 M samples
# per selector, far under Prometheus's 50 M --query.max-samples; 0 asks for the whole fleet at once.
DEFAULT_MODELS_PER_QUERY = 50

# Families whose every series carries the model label. Names only: a prefix never matches a function,
# keyword or label name of PromQL (none starts with these, and label names hold no colon).
_PER_MODEL = re.compile(
    r"(?<![\w:])(?:nv_inference_|nv_cache_num_(?:hits|misses)_per_model|tritonwatch_model_"
    r"|tritonwatch_request_duration_seconds|model:)[\w:]*"
)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
# RE2 metacharacters: everything else stands for itself in a model name.
_META = re.compile(r"([\\.+*?()|\[\]{}^$])")


def batches(models: Sequence[str], size: int) -> Iterator[list[str]]:
    """``models`` sorted, ``size`` at a time (all at once where ``size`` is 0)."""
    names = sorted(set(models))
    step = size if size > 0 else max(1, len(names))
    for i in range(0, len(names), step):
        yield names[i : i + step]


def model_matcher(models: Sequence[str]) -> str:
    """``model=~"..."`` matching exactly these names (RE2 anchors the whole value)."""
    alternatives = "|".join(_META.sub(r"\\\1", m) for m in models)
    return f"{catalog.MODEL}=~{promql_string(alternatives)}"


def restrict(expr: str, models: Sequence[str]) -> str:
    """``expr`` with every per-model selector narrowed to ``models``."""
    matcher = model_matcher(models)
    out: list[str] = []
    i = 0
    n = len(expr)
    while i < n:
        c = expr[i]
        if c in "\"'`":
            m = _STRING.match(expr, i)
            end = m.end() if m else n
            out.append(expr[i:end])
            i = end
            continue
        if c in "{[":
            end = _closing(expr, i)
            out.append(expr[i:end])
            i = end
            continue
        m = _PER_MODEL.match(expr, i)
        if not m:
            out.append(c)
            i += 1
            continue
        out.append(m.group(0))
        i = m.end()
        j = i
        while j < n and expr[j] == " ":
            j += 1
        if j < n and expr[j] == "{":
            end = _closing(expr, j)
            inner = expr[j + 1 : end - 1].strip().rstrip(",")
            out.append("{" + (f"{inner},{matcher}" if inner else matcher) + "}")
            i = end
        else:
            out.append("{" + matcher + "}")
    return "".join(out)


def _closing(expr: str, start: int) -> int:
    """The index after the bracket closing the one at ``start``, skipping string literals."""
    close = "}" if expr[start] == "{" else "]"
    i = start + 1
    while i < len(expr):
        c = expr[i]
        if c in "\"'`":
            m = _STRING.match(expr, i)
            i = m.end() if m else len(expr)
            continue
        if c == close:
            return i + 1
        i += 1
    return len(expr)
