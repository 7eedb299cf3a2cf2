"""The lanes by construction (tests/support/lanes.py): what starts a process is slow, the rest is refused one.

The samples are looked up by name (strings), so that this test's own code reaches none of them and
stays in the fast lane, where the guard is on.
"""

from __future__ import annotations

import pytest
from support import lane_samples
from support.lanes import ProcessReach


@pytest.mark.parametrize("name", sorted(lane_samples.REACH))
def test_reach_follows_helpers_and_classes_to_a_process_starter(name: str) -> None:
    assert ProcessReach().reaches(vars(lane_samples)[name]) is lane_samples.REACH[name]


def test_this_test_is_in_the_fast_lane(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("slow") is None


@pytest.mark.parametrize("name", ["popen_true", "exec_true", "through_a_helper"])
def test_a_fast_test_that_starts_a_process_fails_naming_the_slow_lane(name: str) -> None:
    with pytest.raises(
        AssertionError, match=r"test_lanes\.py::.* starts a process, so it belongs in the slow lane"
    ):
        vars(lane_samples)[name]()


def test_a_program_run_once_passes_the_guard() -> None:
    assert vars(lane_samples)["once_true"]() == 0
