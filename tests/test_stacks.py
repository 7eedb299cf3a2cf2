"""The two stacks (tests/support/stacks.py): what they are, and that a missing program fails, never skips."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import stacks

from tritonwatch.local.promstack import ALERTMANAGER_BIN, PROMETHEUS_BIN


def test_today_s_versions_come_from_the_build_script() -> None:
    modules = stacks.module_versions()
    assert set(modules) == {"prometheus", "alertmanager", "victoriametrics"}
    current = stacks.current()
    assert current.versions == {c: stacks.release(c, v) for c, v in modules.items()}
    assert stacks.release("prometheus", "v0.316.0") == "3.16.0"
    assert stacks.release("alertmanager", "v0.35.0") == "0.35.0"
    assert stacks.release("victoriametrics", "v1.151.0") == "1.151.0"
    assert stacks.debian("/nonexistent").prometheus_major == 2


def test_the_product_finds_each_program_under_the_name_the_bin_dir_gives_it() -> None:
    assert {PROMETHEUS_BIN, ALERTMANAGER_BIN} <= set(stacks.PROGRAMS)


def test_a_missing_program_fails_naming_how_to_get_it(tmp_path: Path) -> None:
    empty = stacks.current(tmp_path / "no-cache")
    assert set(empty.programs.values()) == {None}
    with pytest.raises(
        stacks.MissingProgram, match=r"the current stack has no promtool: make stack builds it"
    ):
        _ = empty.promtool
    bin_dir = empty.bin_dir(tmp_path / "dirs")
    script = (bin_dir / "promtool").read_text()
    assert "make stack builds it" in script and "exit 127" in script
    # Upstream's name for Alertmanager is there too, and fails the same way.
    assert "no prometheus-alertmanager" in (bin_dir / "alertmanager").read_text()
    debian = stacks.debian(str(tmp_path))  # a PATH with nothing on it
    with pytest.raises(
        stacks.MissingProgram, match=r"the debian stack has no vmalert: make debs installs it"
    ):
        _ = debian.vmalert


def test_a_present_program_is_linked_under_debian_s_name(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    modules = stacks.module_versions()
    built = cache / f"alertmanager-{modules['alertmanager']}" / "bin" / "alertmanager"
    built.parent.mkdir(parents=True)
    built.write_text("#!/bin/sh\n")
    built.chmod(0o755)
    stack = stacks.current(cache)
    assert stack.alertmanager == str(built)
    bin_dir = stack.bin_dir(tmp_path / "dirs")
    assert (bin_dir / "prometheus-alertmanager").resolve() == built.resolve()
    assert (bin_dir / "alertmanager").resolve() == built.resolve()


@pytest.mark.slow
@pytest.mark.parametrize("platform", ["current"], indirect=True)
def test_today_s_programs_are_the_module_versions_the_script_builds(platform: stacks.Stack) -> None:
    """Each binary names the module version it was built from: in its Go build info (``go version -m``
    prints the same), or, for Alertmanager, built from a copy of its module, as its version stamp (the
    ``-X`` of tools/build-stack.sh, which ``alertmanager --version`` prints): a stale cache shows another."""
    modules = {
        "prometheus": "github.com/prometheus/prometheus",
        "alertmanager": "github.com/prometheus/alertmanager",
        "victoriametrics": "github.com/VictoriaMetrics/VictoriaMetrics",
    }
    versions = stacks.module_versions()
    for program, (component, _built) in stacks.PROGRAMS.items():
        data = Path(platform.path(program)).read_bytes()
        if component == "alertmanager":
            needles = [f"mod\t{modules[component]}\t".encode(), versions[component].lstrip("v").encode()]
        else:
            needles = [f"{modules[component]}\t{versions[component]}".encode()]
        assert all(n in data for n in needles), (program, needles)
