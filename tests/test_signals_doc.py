"""docs/signals.md is generated from the catalog and must not drift from it."""

from pathlib import Path

from support.scripts import load_script

from tritonwatch import catalog

render = load_script("docs/signals_doc.py").render

DOC = Path(__file__).resolve().parent.parent / "docs" / "signals.md"


def test_signals_doc_matches_catalog() -> None:
    assert DOC.read_text() == render(), "regenerate: python docs/signals_doc.py > docs/signals.md"


def test_every_signal_is_documented_with_its_recording_rule() -> None:
    text = DOC.read_text()
    for sig in catalog.SIGNALS:
        assert sig.name in text and sig.record in text
