"""``--web-config`` (exporter-toolkit format): basic auth with bcrypt, TLS with a certificate the test
makes, a handshake that never comes cannot stall the endpoint, and a bad file is one line naming the
field."""

from __future__ import annotations

import base64
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest
import requests
from support.harness import ANSWER_WITHIN, running_sidecar

from tritonwatch import catalog
from tritonwatch.cli import main
from tritonwatch.exporters.sidecar import Sidecar

UNREACHABLE = ["--triton", "http://127.0.0.1:1", "--interval", "0.5", "--timeout", "0.2"]
PASSWORD = "s3cret-scraper"


def bcrypt_hash(password: str) -> str:
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A self-signed certificate for 127.0.0.1, made with the openssl command line."""
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        + ["-keyout", str(d / "server.key"), "-out", str(d / "server.crt"), "-days", "2"]
        + ["-subj", "/CN=tritonwatch-test", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return d


def write_config(d: Path, text: str) -> str:
    f = d / "web.yml"
    f.write_text(text)
    return str(f)


@pytest.fixture(scope="module")
def protected(certs: Path) -> Iterator[Sidecar]:
    """TLS (relative cert paths, read next to the file) and basic auth together."""
    cfg = write_config(
        certs,
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
        f"basic_auth_users:\n  prometheus: '{bcrypt_hash(PASSWORD)}'\n",
    )
    with running_sidecar([*UNREACHABLE, "--web-config", cfg]) as sc:
        yield sc


def get(
    sc: Sidecar, certs: Path, auth: tuple[str, str] | None = None, headers: dict[str, str] | None = None
) -> requests.Response:
    start = time.monotonic()
    resp = requests.get(
        f"https://127.0.0.1:{sc.port}/metrics",
        verify=str(certs / "server.crt"),
        auth=auth,
        headers=headers,
        timeout=ANSWER_WITHIN,
    )
    assert time.monotonic() - start < ANSWER_WITHIN
    return resp


def test_right_credentials_over_tls_get_the_metrics(protected: Sidecar, certs: Path) -> None:
    resp = get(protected, certs, auth=("prometheus", PASSWORD))
    assert resp.status_code == 200
    assert f'{catalog.UP}{{target="triton"}} 0.0' in resp.text


@pytest.mark.parametrize(
    ("auth", "headers"),
    [
        (None, None),  # anonymous
        (("prometheus", "wrong"), None),
        (("nobody", PASSWORD), None),
        (("prometheus", PASSWORD + "x"), None),
        (("prometheus", "x" * 100), None),  # longer than bcrypt's 72 bytes
        (None, {"Authorization": "Basic !!!not-base64"}),
        (None, {"Authorization": "Basic " + base64.b64encode(b"no-colon").decode()}),
        (None, {"Authorization": "Bearer token"}),
    ],
)
def test_anonymous_and_wrong_credentials_get_401(
    protected: Sidecar, certs: Path, auth: tuple[str, str] | None, headers: dict[str, str] | None
) -> None:
    resp = get(protected, certs, auth=auth, headers=headers)
    assert resp.status_code == 401
    assert resp.headers["WWW-Authenticate"].startswith("Basic")
    assert catalog.UP not in resp.text


def test_plain_http_to_the_tls_port_gets_nothing(protected: Sidecar) -> None:
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(
            f"http://127.0.0.1:{protected.port}/metrics", auth=("prometheus", PASSWORD), timeout=ANSWER_WITHIN
        )


def test_certificate_is_checked_by_the_client(protected: Sidecar) -> None:
    # the certificate is self-signed: a client trusting only the system CAs refuses it
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(f"https://127.0.0.1:{protected.port}/metrics", timeout=ANSWER_WITHIN)


def test_clients_that_never_handshake_do_not_stall_the_endpoint(protected: Sidecar, certs: Path) -> None:
    silent = []
    try:
        for _ in range(20):  # connect, send nothing: no TLS ClientHello ever comes
            s = socket.create_connection(("127.0.0.1", protected.port), timeout=2)
            silent.append(s)
        half = socket.create_connection(("127.0.0.1", protected.port), timeout=2)
        half.sendall(b"\x16\x03\x01\x00")  # the start of a ClientHello, then nothing
        silent.append(half)
        for _ in range(3):
            assert get(protected, certs, auth=("prometheus", PASSWORD)).status_code == 200
    finally:
        for s in silent:
            s.close()


def test_basic_auth_without_tls(tmp_path: Path) -> None:
    cfg = write_config(
        tmp_path, f"basic_auth_users:\n  alice: {bcrypt_hash('pw')}\n  bob: {bcrypt_hash('pw2')}\n"
    )
    with running_sidecar([*UNREACHABLE, "--web-config", cfg]) as sc:
        url = f"http://127.0.0.1:{sc.port}/metrics"
        assert requests.get(url, timeout=ANSWER_WITHIN).status_code == 401
        assert requests.get(url, auth=("alice", "pw2"), timeout=ANSWER_WITHIN).status_code == 401
        assert requests.get(url, auth=("alice", "pw"), timeout=ANSWER_WITHIN).status_code == 200
        assert requests.get(url, auth=("bob", "pw2"), timeout=ANSWER_WITHIN).status_code == 200
        # a cached success must not let a later wrong password through
        assert requests.get(url, auth=("alice", "pw "), timeout=ANSWER_WITHIN).status_code == 401


def test_tls_without_auth(certs: Path, tmp_path: Path) -> None:
    cfg = write_config(
        tmp_path,
        f"tls_server_config:\n  cert_file: {certs / 'server.crt'}\n  key_file: {certs / 'server.key'}\n  min_version: TLS13\n",
    )
    with running_sidecar([*UNREACHABLE, "--web-config", cfg]) as sc:
        resp = requests.get(
            f"https://127.0.0.1:{sc.port}/metrics", verify=str(certs / "server.crt"), timeout=ANSWER_WITHIN
        )
        assert resp.status_code == 200 and catalog.UP in resp.text


BAD_CONFIGS = [
    ("tls_server_confg:\n  cert_file: a\n", "tls_server_confg"),
    ("tls_server_config:\n  cert_file: server.crt\n", "tls_server_config.key_file"),
    ("tls_server_config:\n  cert_file: missing.crt\n  key_file: server.key\n", "tls_server_config.cert_file"),
    ("tls_server_config:\n  cert_file: server.crt\n  key_file: server.crt\n", "tls_server_config"),
    (
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  min_version: TLS09\n",
        "min_version",
    ),
    (
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: Maybe\n",
        "client_auth_type",
    ),
    (
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: RequireAndVerifyClientCert\n",
        "client_ca_file",
    ),
    (
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_ca_file: server.key\n  client_auth_type: RequireAndVerifyClientCert\n",
        "client_ca_file",
    ),
    ("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  ciphers: [x]\n", "ciphers"),
    ("tls_server_config: yes\n", "tls_server_config"),
    ("basic_auth_users:\n  prometheus: plaintext-password\n", "basic_auth_users.prometheus"),
    ("basic_auth_users:\n  prometheus: 12345\n", "basic_auth_users.prometheus"),
    ("basic_auth_users:\n  prometheus: '$2b$99$" + "a" * 53 + "'\n", "basic_auth_users.prometheus"),
    ("basic_auth_users: [prometheus]\n", "basic_auth_users"),
    ("basic_auth_users: {}\n", "basic_auth_users"),
    ("http_server_config: 3\n", "http_server_config"),
    ("- a list\n", "web.yml"),
    ("tls_server_config: [unclosed\n", "web.yml"),
]


@pytest.mark.parametrize(("text", "needle"), BAD_CONFIGS)
def test_bad_web_config_is_one_line_naming_the_field(
    certs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, needle: str
) -> None:
    for name in ("server.crt", "server.key"):
        (tmp_path / name).write_bytes((certs / name).read_bytes())
    cfg = write_config(tmp_path, text)
    code = main(["sidecar", *UNREACHABLE, "--listen", "127.0.0.1:0", "--web-config", cfg])
    err = capsys.readouterr().err.strip()
    assert code != 0
    assert len(err.splitlines()) == 1, err
    assert needle in err and "Traceback" not in err


# --- the sidecar starts fast: heavy libraries stay in the commands that need them ---------------------
HEAVY = ("pandas", "grafanalib", "matplotlib", "tritonclient", "numpy", "gevent", "onnxruntime", "pytriton")


def test_sidecar_help_imports_no_heavy_library() -> None:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tritonwatch", "sidecar", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and "usage:" in proc.stdout
    modules = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    imported = {m.split(".")[0] for m in modules}
    # the measurement works: the sidecar's own modules are listed
    assert any(m.startswith("tritonwatch.exporters.") for m in modules)
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))


def test_a_running_sidecar_with_every_part_imports_no_heavy_library() -> None:
    code = (
        "import sys\n"
        "from tritonwatch.cli import build_parser\n"
        "from tritonwatch.exporters.config import resolve\n"
        "from tritonwatch.exporters.sidecar import Sidecar\n"
        "args = build_parser().parse_args(['sidecar', '--listen', '127.0.0.1:0', '--triton', 'http://127.0.0.1:1',"
        " '--otlp-listen', '127.0.0.1:0', '--dcgm', 'http://127.0.0.1:1/metrics'])\n"
        "sidecar = Sidecar(resolve(args)).start()\n"
        "sidecar.stop()\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]", proc.stdout
