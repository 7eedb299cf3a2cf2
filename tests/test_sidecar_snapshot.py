"""The Triton scrape's snapshots (issue 21): what a subscriber and a reader see, and when."""

from __future__ import annotations

from tritonwatch.exporters.exposition import TextFamily, Texts, family_text
from tritonwatch.exporters.snapshot import Snapshots, TritonSnapshot
from tritonwatch.exporters.source import Health


def snapshot(generation: int) -> TritonSnapshot:
    return TritonSnapshot(generation, float(generation), {}, frozenset({("m", "1")}), frozenset(), True)


def test_subscribers_take_each_good_scrape_before_readers_see_it() -> None:
    health = Health("triton")
    snapshots = Snapshots(health)
    seen: list[tuple[int, int]] = []
    snapshots.subscribe(lambda s: seen.append((s.generation, snapshots.latest.generation)))
    snapshots.publish(snapshot(1))
    snapshots.publish(snapshot(2))
    assert seen == [(1, 0), (2, 1)]  # each subscriber ran while readers still saw the one before
    assert snapshots.latest.generation == 2


def test_values_are_served_only_while_the_data_and_the_target_are_up() -> None:
    health = Health("triton")
    snapshots = Snapshots(health)
    snapshots.publish(snapshot(1))
    assert snapshots.serving() is None  # the data is in, tritonwatch_up not yet 1
    health.success(0.1)
    assert snapshots.serving() is snapshots.latest
    snapshots.down()  # a failed scrape: dropped before up goes to 0
    assert snapshots.serving() is None and snapshots.latest.generation == 1
    assert not snapshots.latest.up


def test_label_texts_belong_to_their_owner_not_the_process() -> None:
    mine, other = Texts(), Texts()
    fam = TextFamily("tw_owned", "owned", ["model"], texts=mine)
    fam.add_many([("a",), ("b",)], [1.0, 2.0])
    assert family_text(fam).endswith('tw_owned{model="a"} 1.0\ntw_owned{model="b"} 2.0\n')
    assert set(mine.prefixes[("tw_owned", ("model",))]) == {("a",), ("b",)}
    assert other.prefixes == {}  # a second sidecar in the process starts with nothing of the first's
