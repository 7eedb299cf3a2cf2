"""docs/signals.md is generated from the catalog and must not drift from it."""

from pathlib import Path

from tritonwatch import catalog
from tritonwatch.signals_doc import render

DOC = Path(__file__).resolve().parent.parent / "docs" / "signals.md"


def test_signals_doc_matches_catalog() -> None:
    assert DOC.read_text() == render(), "regenerate: python -m tritonwatch.signals_doc > docs/signals.md"


def test_every_signal_is_documented_with_its_recording_rule() -> None:
    text = DOC.read_text()
    for sig in catalog.SIGNALS:
        assert sig.name in text and sig.record in text
