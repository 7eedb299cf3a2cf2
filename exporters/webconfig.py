"""``--web-config``: TLS and basic auth in the Prometheus exporter-toolkit format.

    tls_server_config:
      cert_file: server.crt
      key_file: server.key
    basic_auth_users:
      prometheus: $2b$12$...   # bcrypt hash

Relative paths are read relative to the web config file, as exporter-toolkit does.
"""

from __future__ import annotations

import base64
import binascii
import ssl
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import bcrypt
import yaml

from tritonwatch.errors import UsageError

KNOWN = {"tls_server_config", "basic_auth_users", "http_server_config"}
TLS_KNOWN = {"cert_file", "key_file", "client_ca_file", "client_auth_type", "min_version"}


def _field(path: Path, name: str) -> str:
    return f"{path}: {name}"


def load_web_config(
    file: str,
) -> tuple[Callable[[str | None], bool] | None, Callable[[ThreadingHTTPServer], None] | None]:
    path = Path(file)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise UsageError(f"--web-config: cannot read {file}: {exc.strerror}") from None
    except yaml.YAMLError:
        raise UsageError(f"--web-config: {file} is not valid YAML") from None
    if not isinstance(data, dict):
        raise UsageError(f"{file}: expected a mapping")
    for key in data:
        if key not in KNOWN:
            raise UsageError(f"{file}: unknown field {key!r}")
    authorize = _basic_auth(path, data.get("basic_auth_users"))
    wrap = _tls(path, data.get("tls_server_config"))
    return authorize, wrap


def _basic_auth(path: Path, users: Any) -> Callable[[str | None], bool] | None:
    if not users:
        return None
    if not isinstance(users, dict):
        raise UsageError(f"{_field(path, 'basic_auth_users')}: expected a mapping of user: bcrypt hash")
    hashes: dict[str, bytes] = {}
    for user, hashed in users.items():
        h = str(hashed).encode()
        if not h.startswith((b"$2a$", b"$2b$", b"$2y$")):
            raise UsageError(f"{_field(path, f'basic_auth_users.{user}')}: not a bcrypt hash")
        hashes[str(user)] = h
    cache: dict[str, bool] = {}  # bcrypt is slow on purpose; a scraper sends the same header each time

    def authorize(header: str | None) -> bool:
        if not header or not header.startswith("Basic "):
            return False
        if header in cache:
            return cache[header]
        try:
            user, _, password = base64.b64decode(header[6:], validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        want = hashes.get(user)
        ok = bool(want) and bcrypt.checkpw(password.encode(), want or b"")
        if len(cache) < 64:
            cache[header] = ok
        return ok

    return authorize


def _tls(path: Path, tls: Any) -> Callable[[ThreadingHTTPServer], None] | None:
    if not tls:
        return None
    if not isinstance(tls, dict):
        raise UsageError(f"{_field(path, 'tls_server_config')}: expected a mapping")
    for key in tls:
        if key not in TLS_KNOWN:
            raise UsageError(f"{_field(path, 'tls_server_config')}: unknown field {key!r}")
    files = {}
    for key in ("cert_file", "key_file"):
        if not tls.get(key):
            raise UsageError(f"{_field(path, 'tls_server_config.' + key)}: required")
        f = Path(tls[key])
        files[key] = f if f.is_absolute() else path.parent / f
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(files["cert_file"], files["key_file"])
    except (OSError, ssl.SSLError) as exc:
        raise UsageError(
            f"{_field(path, 'tls_server_config')}: cannot load certificate/key ({exc})"
        ) from None
    if tls.get("client_ca_file"):
        ca = Path(tls["client_ca_file"])
        ctx.load_verify_locations(ca if ca.is_absolute() else path.parent / ca)
        if tls.get("client_auth_type") == "RequireAndVerifyClientCert":
            ctx.verify_mode = ssl.CERT_REQUIRED

    def wrap(server: ThreadingHTTPServer) -> None:
        server.socket = ctx.wrap_socket(server.socket, server_side=True)

    return wrap
