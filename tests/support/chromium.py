"""Headless Chromium for the report's HTML: a screenshot of the page and its text as rendered."""

from __future__ import annotations

import html
import re
import subprocess
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"

_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def available() -> bool:
    return Path(CHROMIUM).exists()


def screenshot(page: Path, shot: Path, profile: Path, width: int = 1280, height: int = 4800) -> None:
    """Render ``page`` (a local file, nothing fetched) into the PNG ``shot``."""
    shot.unlink(missing_ok=True)
    subprocess.run(
        [CHROMIUM, *_FLAGS, f"--user-data-dir={profile}", f"--screenshot={shot}"]
        + [f"--window-size={width},{height}", page.as_uri()],
        check=True,
        capture_output=True,
        timeout=120,
    )


def text(page: Path, profile: Path) -> str:
    """The page's text after Chromium parsed and laid it out (``--dump-dom``), tags dropped."""
    dom = subprocess.run(
        [CHROMIUM, *_FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    body = re.sub(r"<(style|script)[^>]*>.*?</\1>", " ", dom, flags=re.S)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body)))
