"""The hand-written kustomizations ``tritonwatch k8s`` writes beside its generated files, from package
data: the base (``--base DIR``: kustomization, Namespace, Deployment, Service, PodMonitor) and the
overlays' kustomizations (``--autoscaling``, ``--triton265``), so that a pip install, without a
checkout, writes a tree ``kubectl apply -k`` takes whole.

Each kustomization's ``namespace:`` is the one given with ``--namespace`` (the autoscalers' query reads
the namespace it was generated for: an overlay that moved the objects elsewhere would scale on nothing).
"""

from __future__ import annotations

import re
from importlib import resources

from tritonwatch.errors import UsageError

DEFAULT_NAMESPACE = "triton"
BASE_DIR = "kubernetes"
BASE_FILES = ("kustomization.yaml", "namespace.yaml", "triton.yaml", "service.yaml", "podmonitor.yaml")
AUTOSCALING_FILES = (
    "keda/kustomization.yaml",
    "prometheus-adapter/kustomization.yaml",
    "sidecar-slo/kustomization.yaml",
)
TRITON265_FILES = ("kustomization.yaml", "native-latency/kustomization.yaml")
_KUSTOMIZATION_NAMESPACE = re.compile(rf"^namespace: {DEFAULT_NAMESPACE}$", re.MULTILINE)
_NAMESPACE_OBJECT = re.compile(rf"^  name: {DEFAULT_NAMESPACE}$", re.MULTILINE)


def _read(folder: str, name: str) -> str:
    path = resources.files("tritonwatch.deploy").joinpath(folder, *name.split("/"))
    try:
        return path.read_text()
    except OSError as exc:  # an install without its package data
        raise UsageError(
            f"tritonwatch's package data has no deploy/{folder}/{name} ({exc.strerror})"
        ) from None


def _in_namespace(name: str, text: str, namespace: str) -> str:
    if name.endswith("kustomization.yaml"):
        return _KUSTOMIZATION_NAMESPACE.sub(f"namespace: {namespace}", text)
    if name == "namespace.yaml":
        return _NAMESPACE_OBJECT.sub(f"  name: {namespace}", text)
    return text


def files(folder: str, names: tuple[str, ...], namespace: str) -> dict[str, str]:
    """Relative path -> text of the hand-written files of ``deploy/<folder>``, in ``namespace``."""
    return {name: _in_namespace(name, _read(folder, name), namespace) for name in names}


def base(namespace: str) -> dict[str, str]:
    return files(BASE_DIR, BASE_FILES, namespace)


def autoscaling(namespace: str) -> dict[str, str]:
    return files("autoscaling", AUTOSCALING_FILES, namespace)


def triton265(namespace: str) -> dict[str, str]:
    return files("triton265", TRITON265_FILES, namespace)
