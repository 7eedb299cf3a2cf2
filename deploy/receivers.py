"""Receivers that would drop pages: the paging receivers of the generated ``AlertmanagerConfig`` that
have no integration.

An ``AlertmanagerConfig`` takes secrets only as references to Kubernetes Secrets, so ``tritonwatch k8s``
writes its receivers by name alone (``amconfig``): until an overlay adds an integration to ``page``,
``ticket`` and ``default`` (docs/deploy.md, "Receivers on Kubernetes"), Alertmanager routes the alerts
there and sends them nowhere. ``warning`` is the one line the command prints for it.
"""

from __future__ import annotations

from typing import Any

PAGING = ("default", "page", "ticket")


def silent(amconfig_doc: dict[str, Any]) -> list[str]:
    """The paging receivers of an ``AlertmanagerConfig`` with no integration (only a name)."""
    return sorted(
        r["name"]
        for r in amconfig_doc["spec"].get("receivers", [])
        if r["name"] in PAGING and set(r) == {"name"}
    )


def warning(amconfig_doc: dict[str, Any], file_name: str) -> str | None:
    names = silent(amconfig_doc)
    if not names:
        return None
    return (
        f"{file_name}: receivers {', '.join(names)} have no integration, so their pages reach nobody: "
        'add one from a Secret with an overlay patch (docs/deploy.md, "Receivers on Kubernetes")'
    )
