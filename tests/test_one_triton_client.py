"""Triton's HTTP API and its model config are spoken in one place each (issue 36).

Product modules (everything the package ships, ``local/`` aside: the bundled Triton's launcher and the
load driver may keep their own) are read with ``ast``: a string that spells a Triton API path
(``/v2/models/...``, ``/v2/repository/index``, ...; docstrings aside) marks a module that speaks the
API; reading a model-config key (``cfg["max_batch_size"]``, ``cfg.get("instance_group")``,
``"dynamic_batching" in cfg``) marks one that interprets the config. At most two modules may do each:
a gRPC client, a new Triton version or one more hostile-input rule is then written once.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from test_layout import ROOT, modules

API_PATH = re.compile(r"(?<![\w/])/v2/(models|repository|trace|health|logging|\w*sharedmemory)\b")
# Keys of Triton's model config (model_config.proto) that tritonwatch reads.
CONFIG_KEYS = frozenset(
    {
        "backend",
        "default_queue_policy",
        "decoupled",
        "dynamic_batching",
        "ensemble_scheduling",
        "input",
        "instance_group",
        "max_batch_size",
        "max_queue_delay_microseconds",
        "metric_control",
        "model_metrics",
        "model_transaction_policy",
        "platform",
        "preferred_batch_size",
        "response_cache",
        "sequence_batching",
    }
)
MOST = 2
# The core's two, where every caller comes for them.
HOMES = {"tritonwatch.tritonapi", "tritonwatch.modelconfig"}


def _product() -> dict[str, Path]:
    return {m: p for m, p in modules().items() if not m.startswith("tritonwatch.local")}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def speaks_the_api(path: Path) -> bool:
    tree = ast.parse(path.read_text(), str(path))
    docs = _docstrings(tree)
    return any(
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docs
        and API_PATH.search(node.value)
        for node in ast.walk(tree)
    )


def _key(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value in CONFIG_KEYS


def reads_config_keys(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Subscript) and _key(node.slice):
            return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "pop")
            and node.args
            and _key(node.args[0])
        ):
            return True
        if isinstance(node, ast.Compare) and _key(node.left) and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            return True
    return False


def test_the_detectors_see_what_they_look_for(tmp_path: Path) -> None:
    """Each form counts, a docstring and another API's path do not (else the checks below prove nothing)."""
    cases = {
        'u = f"{base}/v2/models/{m}/config"': (True, False),
        'u = base + "/v2/repository/index"': (True, False),
        'u = "/api/v2/alerts"': (False, False),
        '"""Reads ``GET /v2/models/<m>/config``."""': (False, False),
        'n = cfg["max_batch_size"]': (False, True),
        'g = cfg.get("instance_group", [])': (False, True),
        'e = "ensemble_scheduling" in cfg': (False, True),
        'row = {"max_batch_size": 8}': (False, False),
    }
    for source, want in cases.items():
        sample = tmp_path / "sample.py"
        sample.write_text(source + "\n")
        assert (speaks_the_api(sample), reads_config_keys(sample)) == want, source


def test_the_api_is_spoken_in_at_most_two_modules() -> None:
    found = {m for m, p in _product().items() if speaks_the_api(p)}
    assert "tritonwatch.tritonapi" in found
    assert len(found) <= MOST, sorted(found)


def test_the_model_config_is_read_in_at_most_two_modules() -> None:
    found = {m for m, p in _product().items() if reads_config_keys(p)}
    assert "tritonwatch.modelconfig" in found
    assert len(found) <= MOST, sorted(found)


def test_the_homes_are_in_the_core() -> None:
    from test_layout import CORE

    assert HOMES <= CORE
    assert (ROOT / "tritonwatch" / "tritonapi.py").is_file() and (
        ROOT / "tritonwatch" / "modelconfig.py"
    ).is_file()
