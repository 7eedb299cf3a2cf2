"""A Kubernetes control plane on loopback for the slow lane: etcd, kube-apiserver and the Prometheus
Operator, built from their Go modules by ``tools/build-kube.sh`` (``make stack``) into the stack cache,
with the Prometheus Operator's and KEDA's CRDs installed by server-side apply.

No kubelet, scheduler or controller manager: what the product is checked on is what the API server
accepts (its schemas, strict field validation) and what the operator writes before it would touch a
StatefulSet (the ``prometheus-<name>-rulefiles-N`` ConfigMaps, the ``alertmanager-<name>-generated``
Secret). Every process has free ports, its own data directory and certificates under the caller's
folder, and is stopped when the context ends, whatever happened.

kubectl (Debian's) talks to the API server with the kubeconfig written here (a token in
``system:masters``); the operator, which has no kubeconfig flag, with a client certificate whose
organisation is ``system:masters``, signed by the CA the API server trusts.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from conftest import need_binary

from support.stacks import cache_dir
from tritonwatch.local.procs import Managed, free_port, wait_until

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "tools" / "build-kube.sh"
T = TypeVar("T")


def versions(script: Path = BUILD_SCRIPT) -> dict[str, str]:
    """The versions the build script builds by default: {"kubernetes": "v1.34.4", "etcd": ..., ...}."""
    found = re.findall(r"^([A-Z]+)_VERSION=\$\{\1_VERSION:-(v[0-9.]+)\}", script.read_text(), re.MULTILINE)
    return {name.lower(): version for name, version in found}


@dataclass(frozen=True)
class Build:
    """Where tools/build-kube.sh put each part."""

    etcd: Path
    apiserver: Path
    operator: Path
    operator_crds: Path
    keda_crds: Path

    @classmethod
    def find(cls, cache: Path | None = None) -> Build:
        cache = cache or cache_dir()
        v = versions()
        operator = cache / f"prometheus-operator-{v['operator']}"
        build = cls(
            etcd=cache / f"etcd-{v['etcd']}" / "bin" / "etcd-embed",
            apiserver=cache / f"kubernetes-{v['kubernetes']}" / "bin" / "kube-apiserver",
            operator=operator / "bin" / "operator",
            operator_crds=operator / "crds",
            keda_crds=cache / f"keda-{v['keda']}" / "crds",
        )
        missing = [str(p) for p in vars(build).values() if not p.exists()]
        if missing:
            pytest.fail(
                f"the control plane is not built ({', '.join(missing)}): make stack builds it "
                f"(tools/build-kube.sh, into {cache})",
                pytrace=False,
            )
        return build


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _certificates(d: Path) -> None:
    """A CA, a client certificate in ``system:masters`` signed by it (the operator's), and the key that
    signs and verifies service account tokens."""
    d.mkdir(parents=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=tritonwatch-test-ca",
             "-keyout", "ca.key", "-out", "ca.crt", cwd=d)  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/O=system:masters/CN=prometheus-operator",
             "-keyout", "client.key", "-out", "client.csr", cwd=d)  # fmt: skip
    _openssl("x509", "-req", "-in", "client.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "2", "-out", "client.crt", cwd=d)  # fmt: skip
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=d)


@dataclass
class ControlPlane:
    url: str
    token: str
    kubeconfig: Path
    workdir: Path
    operator: Managed | None = None  # started once the CRDs are established

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 180
    ) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(
            [need_binary("kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and out.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({out.returncode}): {out.stderr[-3000:]}")
        return out

    def get(self, *args: str) -> Any:
        """``kubectl get ... -o json``, parsed."""
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def api(self, path: str, body: bytes | None = None, method: str = "GET", content_type: str = "") -> Any:
        """A request to the API server with the admin token (server-side apply with a query string the
        kubectl flags do not reach, raw reads)."""
        req = urllib.request.Request(self.url + path, data=body, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        if content_type:
            req.add_header("Content-Type", content_type)
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # the API server's certificate is self-signed (--cert-dir)
        with urllib.request.urlopen(req, timeout=30, context=ctx) as resp:
            return json.loads(resp.read() or b"null")

    def operator_log(self) -> str:
        log_path = self.operator.log_path if self.operator else None
        return log_path.read_text(errors="replace") if log_path else ""


def poll(check: Callable[[], T | None], timeout: float, what: str, interval: float = 0.5) -> T:
    """``check()``'s first answer that is not None (or falsy), within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout:.0f} s")
        time.sleep(interval)


def _ready(url: str, token: str) -> bool:
    req = urllib.request.Request(f"{url}/readyz", headers={"Authorization": f"Bearer {token}"})
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(req, timeout=2, context=ctx) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def _alive_or_fail(proc: Managed) -> None:
    if not proc.alive():
        raise AssertionError(f"{proc.name} exited: {proc.log_tail(15)}")


@contextlib.contextmanager
def control_plane(workdir: Path, build: Build | None = None) -> Iterator[ControlPlane]:
    """etcd, kube-apiserver with the CRDs established, then the Prometheus Operator watching every
    namespace; all stopped on exit."""
    build = build or Build.find()
    need_binary("openssl")
    certs = workdir / "pki"
    _certificates(certs)
    token = secrets.token_hex(16)
    (certs / "tokens.csv").write_text(f'{token},admin,admin-uid,"system:masters"\n')
    with contextlib.ExitStack() as stop:
        etcd_port, peer_port = free_port(), free_port()
        etcd = Managed(
            "etcd",
            [str(build.etcd), f"-data-dir={workdir / 'etcd'}",
             f"-client-url=http://127.0.0.1:{etcd_port}", f"-peer-url=http://127.0.0.1:{peer_port}"],
            log_path=workdir / "etcd.log",
        )  # fmt: skip
        stop.callback(etcd.stop)
        wait_until(lambda: (_alive_or_fail(etcd), "etcd ready" in etcd.log_tail(5))[1], 60, "etcd")
        port = free_port()
        url = f"https://127.0.0.1:{port}"
        apiserver = Managed(
            "kube-apiserver",
            [
                str(build.apiserver),
                f"--etcd-servers=http://127.0.0.1:{etcd_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={workdir / 'apiserver-certs'}",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-account-key-file={certs / 'sa.key'}",
                f"--service-account-signing-key-file={certs / 'sa.key'}",
                f"--token-auth-file={certs / 'tokens.csv'}",
                f"--client-ca-file={certs / 'ca.crt'}",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--authorization-mode=RBAC",
            ],
            log_path=workdir / "kube-apiserver.log",
        )
        stop.callback(apiserver.stop)
        wait_until(lambda: (_alive_or_fail(apiserver), _ready(url, token))[1], 120, "kube-apiserver /readyz")
        kubeconfig = workdir / "kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {"name": "test", "cluster": {"server": url, "insecure-skip-tls-verify": True}}
                    ],
                    "users": [{"name": "admin", "user": {"token": token}}],
                    "contexts": [{"name": "test", "context": {"cluster": "test", "user": "admin"}}],
                    "current-context": "test",
                }
            )
        )
        plane = ControlPlane(url, token, kubeconfig, workdir)
        for crds in (build.operator_crds, build.keda_crds):
            plane.kubectl("apply", "--server-side", "--field-manager=tritonwatch-tests", "-f", str(crds))
        plane.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=120s")
        operator = Managed(
            "prometheus-operator",
            [
                str(build.operator),
                f"--apiserver={url}",
                "--tls-insecure=true",
                f"--cert-file={certs / 'client.crt'}",
                f"--key-file={certs / 'client.key'}",
                "--kubelet-endpoints=false",
                "--kubelet-endpointslice=false",
                f"--web.listen-address=127.0.0.1:{free_port()}",
                "--log-format=json",
            ],
            log_path=workdir / "prometheus-operator.log",
        )
        stop.callback(operator.stop)
        plane.operator = operator
        yield plane
