"""Hostile and broken files (issue 23 cases 4, 5, 6 and the file cases of 9): the SLO file, the sidecar's
config and web config, and ``rules --out``. Each is refused with one line naming the file and field,
exit 2, nothing written; nothing of the user's is overwritten or deleted.
"""

from __future__ import annotations

import copy
import resource
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import need_binary
from support import stacks
from support.harness import sidecar_config
from support.sidecar import TRITONWATCH
from test_alerts_slo import VALID

from tritonwatch import safeyaml, slo
from tritonwatch.alerts import generate, rules
from tritonwatch.cli import main
from tritonwatch.errors import UsageError
from tritonwatch.exporters.webconfig import MAX_BCRYPT_COST, load_web_config


def slo_file(tmp_path: Path, edit: dict[str, Any] | None = None, **spec: Any) -> Path:
    doc = copy.deepcopy(VALID)
    doc["spec"].update(spec)
    for key, value in (edit or {}).items():
        if key == "name":
            doc["metadata"]["name"] = value
        else:
            doc["spec"]["slos"][0][key] = value
    f = tmp_path / "slo.yaml"
    f.write_text(yaml.safe_dump(doc))
    return f


# --- case 4: rules --out writes only what it generates -----------------------------------------------
def test_rules_out_keeps_files_it_did_not_write(tmp_path: Path) -> None:
    """Before: a hand-written team-a.rules.yml and tests/mine.test.yml vanished, exit 0."""
    out = tmp_path / "out"
    (out / "tests").mkdir(parents=True)
    mine = {"team-a.rules.yml": "groups: []\n", "tests/mine.test.yml": "tests: []\n", "README": "notes\n"}
    for rel, text in mine.items():
        (out / rel).write_text(text)
    assert main(["rules", "--slo", str(generate.default_slo()), "--out", str(out)]) == 0
    for rel, text in mine.items():
        assert (out / rel).read_text() == text
    written = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()} - set(mine)
    assert written == set(generate.render(str(generate.default_slo())))  # and no temporary files left
    # A second run replaces its own files (they carry its header) and still keeps the user's.
    assert main(["rules", "--slo", str(generate.default_slo()), "--out", str(out)]) == 0
    assert all((out / rel).read_text() == text for rel, text in mine.items())


def test_rules_out_refuses_to_overwrite_a_file_it_did_not_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "catalog.rules.yml").write_text("# my own rules\ngroups: []\n")
    assert main(["rules", "--slo", str(generate.default_slo()), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "catalog.rules.yml exists and was not written by tritonwatch rules" in err
    assert sorted(p.name for p in out.iterdir()) == ["catalog.rules.yml"]  # nothing written
    assert (out / "catalog.rules.yml").read_text() == "# my own rules\ngroups: []\n"


def test_rules_out_never_follows_a_link_it_finds(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.yml"
    target.write_text(generate.header("slo.yaml", "x") + "groups: []\n")  # looks generated, is a link
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.rules.yml").symlink_to(target)
    assert main(["rules", "--slo", str(generate.default_slo()), "--out", str(out)]) == 0
    assert (out / "old.rules.yml").is_symlink() and target.exists()


# --- case 5: SLO values checked for the engines they are written into ------------------------------
@pytest.mark.parametrize(
    ("edit", "spec", "field"),
    [
        ({}, {"up_job": "(?=tri)triton"}, "spec.up_job: lookaround"),
        ({}, {"up_job": r"(t)\1"}, "spec.up_job: backreference"),
        ({}, {"up_job": "triton*+"}, "spec.up_job: possessive repetition"),
        ({}, {"up_job": "triton\\Z"}, "spec.up_job: \\Z or \\z"),
        ({}, {"up_job": "{{ .Labels }}"}, "spec.up_job: must not contain '{{'"),
        ({"name": "fleet\nx: 1"}, {}, "metadata.name: must not contain control characters"),
        ({"model": "resnet50\n"}, {}, "spec.slos[0].model: not a Triton model name"),
        ({}, {"grouping": ["cluster\n"]}, "spec.grouping[0]: not a usable label name"),
        (
            {},
            {"runbook_base_url": "https://x/{{ .Labels }}"},
            "spec.runbook_base_url: must be an http(s) URL",
        ),
        (
            {"availability": {"objective": 1e-30}},
            {},
            "spec.slos[0].availability.objective: must be above 82.1429",
        ),
        (
            {"availability": {"objective": 80}},
            {},
            "spec.slos[0].availability.objective: must be above 82.1429",
        ),
        (
            {"availability": {"objective": 99.9999999999}},
            {},
            "spec.slos[0].availability.objective: must be at most 99.9999999",
        ),
        (
            {"latency": {"threshold": "50ms", "objective": 50}},
            {},
            "spec.slos[0].latency.objective: must be above 82.1429",
        ),
    ],
)
def test_slo_values_are_refused_naming_the_field_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: dict[str, Any], spec: dict[str, Any], field: str
) -> None:
    """Before: each of these was accepted, exit 0, and broke or bent the generated files."""
    f = slo_file(tmp_path, edit, **spec)
    out = tmp_path / "out"
    assert main(["rules", "--slo", str(f), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{f}: {field}" in err, err
    assert not out.exists()


def test_a_quote_in_up_job_stays_inside_the_promql_string(platform: stacks.Stack, tmp_path: Path) -> None:
    """Before: ``up_job: 'triton"} or up #'`` closed the matcher: TritonServerDown fired for every target."""
    spec = slo.load(slo_file(tmp_path, up_job='triton"} or up #'))
    assert rules.up_matcher(spec) == 'up{job=~"triton\\"} or up #"}'
    out = tmp_path / "out"
    assert main(["rules", "--slo", str(tmp_path / "slo.yaml"), "--out", str(out)]) == 0
    check = subprocess.run(
        [need_binary("promtool"), "check", "rules", str(out / "operational.rules.yml")],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_the_lowest_objective_the_window_allows_still_generates(tmp_path: Path) -> None:
    f = slo_file(tmp_path, {"availability": {"objective": 83.34}})
    assert main(["rules", "--slo", str(f), "--out", str(tmp_path / "out")]) == 0


# --- case 6: YAML alias bombs -------------------------------------------------------------------------
def _bomb() -> str:
    """~700 bytes that expand to 9^9 (387 million) strings."""
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        text += f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]\n"
    return text


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # a bomb must fail, not swap the machine


@pytest.mark.parametrize("command", ["rules --slo", "sidecar --config", "sidecar --web-config"])
def test_an_alias_bomb_is_refused_at_once(tmp_path: Path, command: str) -> None:
    """Before: the CLI hung at 2+ GB on each of these files."""
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(_bomb())
    argv = [str(TRITONWATCH), *command.split(), str(bomb)]
    argv += ["--out", str(tmp_path / "out")] if command.startswith("rules") else ["--listen", "127.0.0.1:0"]
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=20, preexec_fn=_limited)
    took = time.monotonic() - start
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and f"more than {safeyaml.MAX_NODES} nodes" in done.stderr
    assert str(bomb) in done.stderr
    assert took < 10


def test_aliases_within_the_budget_still_load() -> None:
    assert safeyaml.load("base: &b {objective: 99}\nx: *b\ny: *b\n") == {
        "base": {"objective": 99},
        "x": {"objective": 99},
        "y": {"objective": 99},
    }
    with pytest.raises(safeyaml.AliasBudgetError, match="its own ancestor"):
        safeyaml.load("a: &a [1, *a]\n")


# --- case 9: config types checked, never coerced; web config limits -------------------------------
@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("interval: true", "--interval: must be a number (got bool True)"),
        ("max_payload_bytes: 1.9", "--max-payload-bytes: must be a whole number (got float 1.9)"),
        ("probe: [a, b]", "--probe: must be a string (got list ['a', 'b'])"),
        ("max_models: yes", "--max-models: must be a whole number (got bool True)"),
        ("triton: 8000", "--triton: must be a string (got int 8000)"),
    ],
)
def test_config_file_types_are_checked_not_coerced(tmp_path: Path, line: str, message: str) -> None:
    """Before: ``interval: true`` ran at 1 s, ``max_payload_bytes: 1.9`` capped at 1 byte and
    ``probe: [a, b]`` probed a model named ``['a'``."""
    f = tmp_path / "sidecar.yaml"
    f.write_text(line + "\n")
    with pytest.raises(UsageError) as err:
        sidecar_config(["--config", str(f)])
    assert str(err.value) == message


def test_config_file_numbers_of_the_right_kind_still_load(tmp_path: Path) -> None:
    f = tmp_path / "sidecar.yaml"
    f.write_text("interval: 2\nmax_models: 7\nprobe: a,b\nwindow: 30.5\n")
    cfg = sidecar_config(["--config", str(f)])
    assert (cfg.interval, cfg.max_models, cfg.probe_models, cfg.window) == (2.0, 7, ("a", "b"), 30.5)


def test_a_bcrypt_cost_over_the_cap_is_refused_at_once(tmp_path: Path) -> None:
    """Before: a cost-31 hash passed the check and startup hung hashing the decoy (2^31 rounds)."""
    f = tmp_path / "web.yml"
    f.write_text("basic_auth_users:\n  prometheus: $2b$31$" + "a" * 53 + "\n")
    start = time.monotonic()
    argv = [str(TRITONWATCH), "sidecar", "--web-config", str(f), "--listen", "127.0.0.1:0"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"basic_auth_users.prometheus: bcrypt cost 31 is over {MAX_BCRYPT_COST}" in done.stderr
    assert time.monotonic() - start < 10


def test_a_list_where_a_tls_version_belongs_is_one_line(tmp_path: Path) -> None:
    """Before: ``min_version: [TLS12]`` was a traceback (unhashable list)."""
    f = tmp_path / "web.yml"
    f.write_text(f"tls_server_config:\n  cert_file: {f}\n  key_file: {f}\n  min_version: [TLS12]\n")
    with pytest.raises(UsageError) as err:
        load_web_config(str(f))
    assert str(err.value) == f"{f}: tls_server_config.min_version: ['TLS12'] is not one of TLS12, TLS13"
