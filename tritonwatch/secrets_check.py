"""Secrets never enter the SLO file: Alertmanager receiver settings that hold one must name a file
(``*_file``) that Alertmanager reads at run time, so no secret is written into a committed, generated
Alertmanager config."""

from __future__ import annotations

# Receiver fields that hold secrets: they must come from the matching ``*_file`` field (read by
# Alertmanager at run time) so that no secret is ever written into a generated, committed file.
SECRET_FIELDS = frozenset(
    {
        "api_key",
        "api_url",
        "auth_password",
        "auth_secret",
        "bearer_token",
        "bot_token",
        "password",
        "routing_key",
        "service_key",
        "token",
        "user_key",
    }
)


def find_secret(value: object, where: str) -> str | None:
    """The error line for the first secret-holding field set anywhere under ``value``; None if none."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k in SECRET_FIELDS and v is not None:
                return f"{where}.{k}: secrets must not be written into the SLO file; use {k}_file"
            found = find_secret(v, f"{where}.{k}")
            if found:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = find_secret(v, f"{where}[{i}]")
            if found:
                return found
    return None
