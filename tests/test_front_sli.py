"""Availability from the front (``availability.from``) and where Triton is blind, without processes.

The selector grammar refuses anything but a metric name and label matchers, with one line naming
the field and nothing written; the SLI rules read only the front's counters; the promtool tests
generated for them pass, and fail against a rule that reads Triton's counters instead; and
``uncounted.reasons`` marks python and decoupled models from their configs.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from support import sli_swap, stacks
from support.fake_triton import FakeTriton, fake_triton

from tritonwatch import catalog, slo, uncounted
from tritonwatch.alerts import promtestfiles, rules
from tritonwatch.alerts.generate import render, write
from tritonwatch.cli import main
from tritonwatch.errors import UsageError
from tritonwatch.exporters.triton import TritonApi
from tritonwatch.selector import parse_selector, satisfying_labels

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "alerts" / "examples" / "haproxy-slo.yaml"
ERRORS = 'haproxy_backend_http_responses_total{proxy="flaky",code="5xx"}'
TOTAL = 'haproxy_backend_http_responses_total{proxy="flaky"}'
FIELD = "spec.slos[0].availability.from"


def doc(errors: object = ERRORS, total: object = TOTAL, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "tritonwatch/v1",
        "kind": "ServiceLevelObjectives",
        "metadata": {"name": "front"},
        "spec": {
            "window": "28d",
            **spec,
            "slos": [
                {
                    "model": "flaky",
                    "availability": {"objective": 99.9, "from": {"errors": errors, "total": total}},
                }
            ],
        },
    }


HOSTILE = [
    (
        "up) or vector(1",
        "errors: not a counter selector",
        "expected the end of the selector at column 3, got ') or vector(1'",
    ),
    ('up{job="x"}\n# comment', "errors: control character '\\n' in selector", ""),
    (
        f"rate({ERRORS}[5m])",
        "errors: not a counter selector",
        "expected the end of the selector at column 5, got '(",
    ),
    (f"sum({ERRORS})", "errors: not a counter selector", "at column 4"),
    (
        f"{ERRORS} or vector(1)",
        "errors: not a counter selector",
        "expected the end of the selector at column 64, got 'or vector(1)'",
    ),
    (f"{ERRORS}[5m]", "errors: not a counter selector", "got '[5m]'"),
    (f"{ERRORS} offset 1h", "errors: not a counter selector", "got 'offset 1h'"),
    (f"{ERRORS} # a comment", "errors: not a counter selector", "got '# a comment'"),
    ('x{__name__="up"}', "errors: not a counter selector", "a label name not starting with __"),
    ("x{code='5xx'}", "errors: not a counter selector", "expected a double-quoted value"),
    ('x{code="5\\n"}', "errors: not a counter selector", 'an escape \\" or \\\\ only'),
    ('x{code="5xx"', "errors: not a counter selector", "expected ',' or '}' at column 13, got the end"),
    ('x{code="5xx"}}', "errors: not a counter selector", "got '}'"),
    ('x{code=~"(5"}', "errors: label code: not a valid regular expression", ""),
    (
        'x{code=~"(?!2)..."}',
        "errors: label code: lookaround (?=, (?!, (?<=, (?<! is not Prometheus (RE2)",
        "",
    ),
    ('x{code=~"(?>5)xx"}', "errors: label code: atomic group (?> is not Prometheus (RE2)", ""),
    ('x{code="5xx",code="4xx"}', "errors: label 'code' matched twice with =", ""),
    ("x\ty", "errors: control character '\\t'", ""),
    ("", "errors: not a counter selector", "expected a metric name at column 1"),
    (["up"], "errors: must be a counter selector string (got list)", ""),
    ("x" * 1025, "errors: longer than 1024 characters", ""),
]


@pytest.mark.parametrize(("errors", "message", "detail"), HOSTILE)
def test_hostile_selectors_are_refused_with_one_line_and_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], errors: object, message: str, detail: str
) -> None:
    f = tmp_path / "slo.yaml"
    f.write_text(yaml.safe_dump(doc(errors=errors)))
    out = tmp_path / "out"
    out.mkdir()
    (out / "model-flaky.rules.yml").write_text("earlier output\n")  # a file of an earlier run stays as it was
    code = main(["rules", "--slo", str(f), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and f"{f}: {FIELD}.{message}" in err and detail in err, err
    assert [p.name for p in out.iterdir()] == ["model-flaky.rules.yml"]
    assert (out / "model-flaky.rules.yml").read_text() == "earlier output\n"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"total": ERRORS}, f"{FIELD}.errors: selects the same series as {FIELD}.total"),
        ({"total": None}, f"{FIELD}.total: required"),
        ({"sum": "x"}, f"{FIELD}.sum: unknown field (expected one of: errors, total)"),
    ],
)
def test_incomplete_or_equal_pairs_are_refused(edit: dict[str, object], message: str) -> None:
    raw = doc()
    front = raw["spec"]["slos"][0]["availability"]["from"]
    for k, v in edit.items():
        if v is None:
            del front[k]
        else:
            front[k] = v
    with pytest.raises(UsageError) as exc:
        slo.parse(raw)
    assert str(exc.value) == message


def test_a_selector_reaches_the_rules_as_rendered_from_its_parts() -> None:
    sel = parse_selector(' istio_requests_total { response_code =~ "5..", app!="a\\"b\\\\" } ', "f")
    assert sel.promql() == 'istio_requests_total{response_code=~"5..",app!="a\\"b\\\\"}'
    assert sel.matches("istio_requests_total", {"response_code": "503"})
    assert not sel.matches("istio_requests_total", {"response_code": "5033"})  # anchored, as in PromQL
    assert not sel.matches("istio_requests_total", {"response_code": "503", "app": 'a"b\\'})


# Text built from the selector grammar's own pieces and PromQL's, so that hypothesis reaches deep.
_PIECES = st.sampled_from(
    [
        "x",
        "up",
        "{",
        "}",
        ",",
        "=",
        "!=",
        "=~",
        "!~",
        '"',
        "\\",
        "a",
        "5..",
        " ",
        ")",
        "(",
        "or",
        "vector(1)",
        "#",
        "\n",
        "[5m]",
        "offset",
        "__name__",
        "|",
        ".*",
        "(?=",
        "'",
        "sum",
        ":",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=14).map("".join))
def test_any_text_is_a_selector_that_renders_back_to_itself_or_one_line_naming_the_field(text: str) -> None:
    try:
        sel = parse_selector(text, "f.errors")
    except UsageError as exc:
        message = str(exc)
        assert message.startswith("f.errors: ") and "\n" not in message
        return
    rendered = sel.promql()
    assert parse_selector(rendered, "again") == sel  # what the rules get parses to the same thing
    head = rendered.split("{")[0]  # the metric name: nothing but name characters
    assert "\n" not in rendered and head == sel.metric and head.replace("_", "a").replace(":", "a").isalnum()


def test_front_sli_reads_only_the_fronts_counters() -> None:
    spec = slo.load(EXAMPLE)
    [flaky] = [o for o in spec.objectives() if o.model == "flaky"]
    got = {r.record: r.to_yaml() for r in rules.sli_rules(spec, flaky)}
    labels = {"model": "flaky", "slo": "flaky-availability"}
    mine = '{slo="flaky-availability"}'
    assert got["slo:sli_total:rate5m"] == {
        "record": "slo:sli_total:rate5m",
        "expr": f"sum(rate({TOTAL}[5m1ms]))",
        "labels": labels,
    }
    # A front that creates its error series with the first error reads 0 until then.
    assert got["slo:sli_bad:rate5m"] == {
        "record": "slo:sli_bad:rate5m",
        "expr": f"sum(rate({ERRORS}[5m1ms]))\nor on ()\n0 * slo:sli_total:rate5m{mine}",
        "labels": labels,
    }
    assert [r for r in got if "haproxy" in got[r]["expr"]] == ["slo:sli_total:rate5m", "slo:sli_bad:rate5m"]
    grouped = slo.parse(doc(grouping=["cluster"]))
    exprs = " ".join(r.expr for r in rules.sli_rules(grouped, grouped.objectives()[0]))
    assert f"sum by (cluster) (rate({ERRORS}[5m1ms]))\nor on (cluster)\n0 * " in exprs
    assert "nv_inference" not in exprs
    # steady keeps Triton's counters
    [steady] = [o for o in spec.objectives() if o.model == "steady"]
    assert catalog.TRITON_FAILURE in " ".join(r.expr for r in rules.sli_rules(spec, steady))


def test_test_series_are_built_for_the_usual_fronts() -> None:
    base = {"job": "front"}
    istio_err = parse_selector('istio_requests_total{destination_service_name="m",response_code=~"5.."}', "e")
    istio_all = parse_selector('istio_requests_total{destination_service_name="m"}', "t")
    assert satisfying_labels(istio_err, base) == {
        "job": "front",
        "destination_service_name": "m",
        "response_code": "500",
    }
    assert satisfying_labels(istio_all, base, unlike=istio_err) == {
        "job": "front",
        "destination_service_name": "m",
        "response_code": "2xx",
    }
    nginx = parse_selector('nginx_ingress_controller_requests{ingress="m",status=~"5.."}', "e")
    assert satisfying_labels(nginx) == {"ingress": "m", "status": "500"}
    # total selecting nothing but errors: no good series can exist
    only = parse_selector('x{code=~"5.."}', "t")
    assert satisfying_labels(only, unlike=parse_selector('x{code=~"5.*"}', "e")) is None


@stacks.needs("promtool")
def test_promtool_tests_for_the_front_sli_pass_and_catch_a_rule_that_reads_triton(tmp_path: Path) -> None:
    out = tmp_path / "rules"
    write(render(str(EXAMPLE)), out)
    tests = yaml.safe_load((out / "tests" / "slo-flaky-availability.test.yml").read_text())
    assert tests["rule_files"] == ["../model-flaky.rules.yml"]  # its model's rules only
    names = [t["name"] for t in tests["tests"]]
    assert "flaky-availability: Triton's own counters are not read" in names
    assert "flaky-availability: requests the client canceled are not errors" not in names
    promtool = shutil.which("promtool")
    assert promtool
    ok = subprocess.run(
        [promtool, "test", "rules", "tests/slo-flaky-availability.test.yml"],
        cwd=out,
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.count("SUCCESS") == 1

    # The same tests against rules whose flaky SLI reads Triton's counters: they must fail.
    sli_swap.read_by_triton(out / "model-flaky.rules.yml", EXAMPLE, "flaky", "availability")
    # flaky's two short cases only: the long ones would fail too, at more cost.
    wanted = ("flaky-availability: total outage", "flaky-availability: Triton's own counters")
    tests["tests"] = [t for t in tests["tests"] if t["name"].startswith(wanted)]
    assert len(tests["tests"]) == 2
    (out / "tests" / "flaky.test.yml").write_text(yaml.safe_dump(tests))
    bad = subprocess.run(
        [promtool, "test", "rules", "tests/flaky.test.yml"], cwd=out, capture_output=True, text=True
    )
    assert bad.returncode == 1
    for name in wanted:  # each case fails: one fires on Triton's outage, one misses the front's
        assert name in bad.stdout + bad.stderr


def test_promtests_refuse_a_total_that_selects_only_errors() -> None:
    spec = slo.parse(doc(errors='x{code=~"5.*"}', total='x{code=~"5.."}'))
    with pytest.raises(UsageError) as exc:
        promtestfiles.test_files(spec)
    assert str(exc.value) == f"{FIELD}.total: every series it selects is an error too"


# --- where Triton is blind -------------------------------------------------------------------------
def cfg(**fields: Any) -> dict[str, Any]:
    return {"name": "m", "max_batch_size": 0, **fields}


def ensemble(*steps: str) -> dict[str, Any]:
    return cfg(
        platform="ensemble",
        ensemble_scheduling={"step": [{"model_name": s, "model_version": -1} for s in steps]},
    )


def test_reasons_from_configs() -> None:
    configs = {
        "pre": cfg(backend="python"),
        "llm": cfg(backend="vllm", model_transaction_policy={"decoupled": True}),
        "trt": cfg(backend="tensorrtllm"),
        "onnx": cfg(platform="onnxruntime_onnx"),
        "stream": cfg(backend="tensorrtllm", model_transaction_policy={"decoupled": True}),
        # An ensemble counts a python step's error response itself (measured on Triton 2.51): unmarked.
        "pipeline": ensemble("pre", "trt"),
    }
    shapes = {m: uncounted.shape(c) for m, c in configs.items()}
    assert uncounted.reasons(shapes) == {
        "llm": ("python_backend", "decoupled"),
        "pre": ("python_backend",),
        "stream": ("decoupled",),
    }
    assert set(catalog.UNCOUNTED_ERROR_REASONS) == {"python_backend", "decoupled"}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ([], "a model config must be an object"),
        (cfg(backend=3), "backend must be a string"),
        (
            cfg(model_transaction_policy={"decoupled": "yes"}),
            "model_transaction_policy.decoupled must be a boolean",
        ),
    ],
)
def test_a_config_of_the_wrong_shape_is_refused(config: object, message: str) -> None:
    with pytest.raises(ValueError) as exc:
        uncounted.shape(config)
    assert str(exc.value) == message


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_sidecar_api_keeps_reasons_per_ready_model_and_counts_a_bad_config() -> None:
    with fake_triton() as fake:
        assert isinstance(fake, FakeTriton)
        fake.configs["fail_always"] = cfg(backend="python", model_transaction_policy={"decoupled": True})
        fake.configs["fraud_detector"] = cfg(platform="onnxruntime_onnx", max_batch_size=64)
        clock = Clock()
        api = TritonApi(fake.base_url, 1.0, 5.0, clock=clock, config_refresh=2.0)
        api.step()
        assert api.state.uncounted == {"fail_always": ("python_backend", "decoupled")}
        assert api.health.errors == {}
        # A config that turns hostile is counted; the last good shape is kept, as max_batch_size is.
        fake.configs["fail_always"] = cfg(model_transaction_policy={"decoupled": "yes"})
        clock.now = 3.0
        api.step()
        assert api.health.errors == {"config_bad_json": 1.0}
        assert api.state.uncounted == {"fail_always": ("python_backend", "decoupled")}


# --- tritonwatch rules --triton -------------------------------------------------------------------
def test_rules_triton_names_a_model_without_config_and_an_unreachable_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    f = tmp_path / "slo.yaml"
    raw = doc()
    raw["spec"]["slos"] += [
        {"model": "fail_always", "availability": {"objective": 99}},
        {"model": "fraud_detector", "availability": {"objective": 99}},
        {"model": "pipeline", "availability": {"objective": 99}},
    ]
    f.write_text(yaml.safe_dump(raw))
    with fake_triton() as fake:
        fake.configs["fraud_detector"] = cfg(platform="onnxruntime_onnx")
        fake.configs["pipeline"] = cfg(backend="python")
        with caplog.at_level("WARNING", logger="tritonwatch.alerts.triton_check"):
            code = main(["rules", "--slo", str(f), "--out", str(tmp_path / "out"), "--triton", fake.base_url])
        assert code == 0
        assert [r.getMessage() for r in caplog.records] == [
            f"spec.slos[1].availability (fail_always): not checked: {fake.base_url} gave no config (HTTP 400)",
            "spec.slos[3].availability (pipeline): reads Triton's counters, which do not count this model's "
            "errors (python_backend): set availability.from (docs/uncounted-errors.md)",
        ]
        port = fake.port
    # Triton gone (the port closed): one line naming the URL, nothing written.
    out = tmp_path / "out2"
    code = main(["rules", "--slo", str(f), "--out", str(out), "--triton", f"http://127.0.0.1:{port}"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert f"--triton http://127.0.0.1:{port}/v2/models/fail_always/config: cannot read (" in err
    assert not out.exists()


@pytest.mark.parametrize("url", ["ftp://triton:8000", "triton:8000", "http://", "http://x:8000/?a=1"])
def test_rules_triton_refuses_what_is_not_an_http_base_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str
) -> None:
    out = tmp_path / "out"
    code = main(["rules", "--slo", str(EXAMPLE), "--out", str(out), "--triton", url])
    err = capsys.readouterr().err
    assert (
        code == 2 and err.count("\n") == 1 and f"--triton {url!r}: must be Triton's HTTP API base URL" in err
    )
    assert not out.exists()


@stacks.needs("promtool")
@pytest.mark.parametrize(
    ("errors", "total"),
    [
        (
            'istio_requests_total{reporter="destination",destination_service_name="flaky",response_code=~"5.."}',
            'istio_requests_total{reporter="destination",destination_service_name="flaky"}',
        ),
        (
            'envoy_cluster_upstream_rq_xx{envoy_cluster_name="flaky",envoy_response_code_class="5"}',
            'envoy_cluster_upstream_rq_xx{envoy_cluster_name="flaky"}',
        ),
        ("frontend_errors_total", "frontend_requests_total"),  # two counters: total does not hold errors
    ],
)
def test_promtool_tests_pass_for_the_presets_with_grouping(tmp_path: Path, errors: str, total: str) -> None:
    f = tmp_path / "slo.yaml"
    f.write_text(yaml.safe_dump(doc(errors=errors, total=total, grouping=["cluster"])))
    out = tmp_path / "out"
    assert main(["rules", "--slo", str(f), "--out", str(out)]) == 0
    promtool = shutil.which("promtool")
    assert promtool
    tests = sorted(p.relative_to(out).as_posix() for p in out.glob("tests/slo-*.test.yml"))
    assert tests
    run = subprocess.run([promtool, "test", "rules", *tests], cwd=out, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "sum by (cluster) (rate(" in "".join(p.read_text() for p in out.glob("model-*.rules.yml"))
