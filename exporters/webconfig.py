"""``--web-config``: TLS and basic auth in the Prometheus exporter-toolkit format.

    tls_server_config:
      cert_file: server.crt
      key_file: server.key
      # optional: client_ca_file, client_auth_type (NoClientCert | VerifyClientCertIfGiven |
      #           RequireAndVerifyClientCert), min_version (TLS12 | TLS13)
    basic_auth_users:
      prometheus: $2b$12$...   # bcrypt hash

Relative paths are read relative to the web config file, as exporter-toolkit does. Every error names
the file and the field.
"""

from __future__ import annotations

import base64
import binascii
import re
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bcrypt
import yaml

from tritonwatch import safeyaml
from tritonwatch.errors import UsageError
from tritonwatch.exporters.server import MetricsHTTPServer

KNOWN = {"tls_server_config", "basic_auth_users", "http_server_config"}
TLS_KNOWN = {"cert_file", "key_file", "client_ca_file", "client_auth_type", "min_version", "max_version"}
_BCRYPT = re.compile(r"\$2[aby]\$(\d\d)\$[./A-Za-z0-9]{53}")
# bcrypt's cost is 2^cost rounds: 12 takes ~0.25 s here, 31 would take days, at startup (the decoy
# hash) and for every wrong password a client sends. exporter-toolkit users pick 10-12.
MAX_BCRYPT_COST = 14
_VERSIONS = {"TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}

Authorize = Callable[[str | None], bool]
Wrap = Callable[[MetricsHTTPServer], None]


def load_web_config(file: str) -> tuple[Authorize | None, Wrap | None]:
    path = Path(file)
    try:
        data = safeyaml.load(path.read_text())
    except OSError as exc:
        raise UsageError(f"--web-config: cannot read {file}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"--web-config: {file} is not valid YAML") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"--web-config: {file} is not valid YAML ({safeyaml.problem(exc)})") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UsageError(f"{file}: expected a mapping of tls_server_config, basic_auth_users")
    for key in data:
        if key not in KNOWN:
            raise UsageError(f"{file}: unknown field {key!r}")
    if data.get("http_server_config") is not None and not isinstance(data["http_server_config"], dict):
        raise UsageError(f"{file}: http_server_config: expected a mapping")
    authorize = _basic_auth(path, data.get("basic_auth_users"))
    wrap = _tls(path, data.get("tls_server_config"))
    return authorize, wrap


def _basic_auth(path: Path, users: Any) -> Authorize | None:
    if users is None:
        return None
    if not isinstance(users, dict) or not users:
        raise UsageError(f"{path}: basic_auth_users: expected a mapping of user: bcrypt hash")
    hashes: dict[str, bytes] = {}
    cost = 4
    for user, hashed in users.items():
        m = _BCRYPT.fullmatch(hashed) if isinstance(hashed, str) else None
        if m is None or not 4 <= int(m.group(1)) <= 31:
            raise UsageError(f"{path}: basic_auth_users.{user}: not a bcrypt hash ($2b$<cost>$...)")
        if int(m.group(1)) > MAX_BCRYPT_COST:
            raise UsageError(
                f"{path}: basic_auth_users.{user}: bcrypt cost {int(m.group(1))} is over {MAX_BCRYPT_COST} "
                "(each check would take minutes or more); hash it again with a lower cost"
            )
        if ":" in str(user):
            raise UsageError(f"{path}: basic_auth_users.{user}: a user name cannot contain ':'")
        hashes[str(user)] = hashed.encode()
        cost = max(cost, int(m.group(1)))
    # An unknown user is checked against a hash of the same cost, so that the answer's timing does
    # not tell which user names exist.
    decoy = bcrypt.hashpw(b"decoy", bcrypt.gensalt(rounds=cost))
    cache: dict[str, bool] = {}  # bcrypt is slow on purpose; a scraper sends the same header each time

    def authorize(header: str | None) -> bool:
        if not header or not header.startswith("Basic "):
            return False
        if header in cache:
            return cache[header]
        try:
            user, sep, password = base64.b64decode(header[6:], validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return False
        want = hashes.get(user)
        try:
            ok = bcrypt.checkpw(password.encode(), want or decoy) and want is not None and bool(sep)
        except ValueError:  # e.g. a password over bcrypt's 72 bytes
            return False
        if ok and len(cache) < 64:
            cache[header] = ok  # only successes: wrong guesses must keep paying bcrypt's cost
        return ok

    return authorize


def _tls(path: Path, tls: Any) -> Wrap | None:
    if tls is None:
        return None
    field = f"{path}: tls_server_config"
    if not isinstance(tls, dict):
        raise UsageError(f"{field}: expected a mapping with cert_file and key_file")
    for key in tls:
        if key not in TLS_KNOWN:
            raise UsageError(f"{field}: unknown field {key!r}")
    files: dict[str, Path] = {}
    for key in ("cert_file", "key_file", "client_ca_file"):
        if not tls.get(key):
            if key == "client_ca_file":
                continue
            raise UsageError(f"{field}.{key}: required")
        f = Path(str(tls[key]))
        f = f if f.is_absolute() else path.parent / f
        if not f.is_file():
            raise UsageError(f"{field}.{key}: {f} is not a readable file")
        files[key] = f
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    for key, attr in (("min_version", "minimum_version"), ("max_version", "maximum_version")):
        raw = tls.get(key)
        if raw is None:
            continue
        if not isinstance(raw, str) or raw not in _VERSIONS:
            raise UsageError(f"{field}.{key}: {raw!r} is not one of {', '.join(_VERSIONS)}")
        setattr(ctx, attr, _VERSIONS[raw])
    if ctx.minimum_version < ssl.TLSVersion.TLSv1_2:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(files["cert_file"], files["key_file"])
    except (OSError, ssl.SSLError) as exc:
        raise UsageError(
            f"{field}: cannot load cert_file/key_file ({exc.__class__.__name__}: {exc})"
        ) from None
    mode = tls.get("client_auth_type", "NoClientCert")
    if not isinstance(mode, str) or mode not in _CLIENT_AUTH:
        raise UsageError(f"{field}.client_auth_type: {mode!r} is not one of {', '.join(_CLIENT_AUTH)}")
    if _CLIENT_AUTH[mode] != ssl.CERT_NONE:
        if "client_ca_file" not in files:
            raise UsageError(f"{field}.client_ca_file: required by client_auth_type {mode}")
        try:
            ctx.load_verify_locations(files["client_ca_file"])
        except (OSError, ssl.SSLError) as exc:
            raise UsageError(f"{field}.client_ca_file: cannot load ({exc})") from None
        ctx.verify_mode = _CLIENT_AUTH[mode]

    def wrap(server: MetricsHTTPServer) -> None:
        server.use_tls(ctx)

    return wrap
