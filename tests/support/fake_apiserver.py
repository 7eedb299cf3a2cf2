"""Just enough of a Kubernetes API server on a loopback port for ``kubectl apply --dry-run=client``: the
legacy discovery documents (/api, /apis and each group version's resource list) for the kinds
tritonwatch ships, and 404 for every object, so that kubectl maps every kind to its resource, finds
nothing live and prints what it would create, last-applied annotation included. It stores nothing and
validates nothing: schemas are checked elsewhere (kubernetes-validate, promtool, amtool).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

# group/version -> [(kind, plural, namespaced)]
RESOURCES: dict[str, list[tuple[str, str, bool]]] = {
    "v1": [
        ("Namespace", "namespaces", False),
        ("ConfigMap", "configmaps", True),
        ("Secret", "secrets", True),
        ("Service", "services", True),
        ("PersistentVolumeClaim", "persistentvolumeclaims", True),
    ],
    "apps/v1": [("Deployment", "deployments", True)],
    "batch/v1": [("CronJob", "cronjobs", True)],
    "autoscaling/v2": [("HorizontalPodAutoscaler", "horizontalpodautoscalers", True)],
    "monitoring.coreos.com/v1": [
        ("PodMonitor", "podmonitors", True),
        ("PrometheusRule", "prometheusrules", True),
    ],
    "monitoring.coreos.com/v1alpha1": [("AlertmanagerConfig", "alertmanagerconfigs", True)],
    "keda.sh/v1alpha1": [("ScaledObject", "scaledobjects", True)],
}
VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


def _groups() -> dict[str, object]:
    versions: dict[str, list[str]] = {}
    for gv in RESOURCES:
        if "/" in gv:
            group, version = gv.split("/")
            versions.setdefault(group, []).append(version)
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [
            {
                "name": g,
                "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]},
            }
            for g, vs in versions.items()
        ],
    }


def _resources(gv: str) -> dict[str, object]:
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": [
            {"name": plural, "singularName": kind.lower(), "namespaced": ns, "kind": kind, "verbs": VERBS}
            for kind, plural, ns in RESOURCES[gv]
        ],
    }


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == "/api":
            self._send(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
        elif path == "/apis":
            self._send(200, _groups())
        elif path == "/api/v1":
            self._send(200, _resources("v1"))
        elif path.startswith("/apis/") and path.count("/") == 3 and path[len("/apis/") :] in RESOURCES:
            self._send(200, _resources(path[len("/apis/") :]))
        else:
            status = {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "reason": "NotFound",
                "code": 404,
            }
            self._send(404, status)

    def _send(self, code: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def fake_apiserver(directory: Path) -> Iterator[Path]:
    """Serve on a free loopback port; yields a kubeconfig file (in ``directory``) that points at it."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig = directory / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "fake", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}
                ],
                "contexts": [
                    {"name": "fake", "context": {"cluster": "fake", "user": "fake", "namespace": "default"}}
                ],
                "current-context": "fake",
                "users": [{"name": "fake", "user": {}}],
            }
        )
    )
    try:
        yield kubeconfig
    finally:
        server.shutdown()
        server.server_close()
