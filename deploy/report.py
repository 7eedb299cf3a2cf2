"""The weekly report on a schedule: the Kubernetes objects that run ``tritonwatch report --archive``.

``manifests()`` returns, as plain dicts for the Kubernetes generator to write
(``deploy/kubernetes/generated/report-cronjob.yaml``):

- PersistentVolumeClaim ``tritonwatch-report-archive``: the archive, one folder per ISO week, kept
  from one run to the next (the report compares with last week's and scores its forecast);
- ConfigMap ``tritonwatch-report-slo``: the SLO file (``--slo``), mounted read-only at ``SLO_PATH`` and
  passed as ``--slo``: without it the report has no SLO-bound capacity and no missed-objective findings;
- CronJob ``tritonwatch-report``: Monday 06:00 UTC (``timeZone: Etc/UTC``), one run at a time; it
  reports the 7 days up to Monday 00:00 UTC of the day it runs (``--end`` is that midnight), so the
  week in the archive and in the subject is the ISO week just ended. Mail and webhook settings, SMTP
  credentials included, come from the Secret ``tritonwatch-report`` as ``TRITONWATCH_*`` variables
  (optional: without it the report is only archived); nothing secret is in these manifests. Its
  ``--report-url`` is ``TRITONWATCH_REPORT_URL`` from that Secret, else ``REPORT_URL``: the address
  ``kubectl port-forward`` gives the archive's server, so the chat message's link opens for anyone who
  runs the one line docs/report.md gives;
- Deployment and Service ``tritonwatch-report-archive``: the archive served read-only over HTTP
  (Python's static file server in the report's own image), one folder per week, so the link
  ``<report-url>/<week>/report.html`` opens a page, not a path on a volume. The claim is
  ReadWriteOnce: the report's pod is scheduled beside the server's (pod affinity on the node), where
  the volume is attached.

The image is ``tritonwatch-report`` (``compose/Dockerfile``, target ``report``), its entrypoint
``tritonwatch report``.
"""

from __future__ import annotations

from typing import Any

NAME = "tritonwatch-report"
ARCHIVE_CLAIM = "tritonwatch-report-archive"
SECRET = "tritonwatch-report"  # TRITONWATCH_MAIL_TO, _MAIL_FROM, _SMTP, _SMTP_USER, _SMTP_PASSWORD, _WEBHOOK
IMAGE = "tritonwatch-report"
SCHEDULE = "0 6 * * 1"  # Monday 06:00
TIME_ZONE = "Etc/UTC"
ARCHIVE_PATH = "/archive"
SLO_CONFIGMAP = "tritonwatch-report-slo"
SLO_DIR = "/etc/tritonwatch"
SLO_PATH = f"{SLO_DIR}/slo.yaml"
ARCHIVE_SIZE = "2Gi"  # a week's folder is a few MB (charts): years of weeks
USER_ID = 10001  # the image's unprivileged user (compose/Dockerfile)
# The period ends at midnight UTC of the day the job runs: on a Monday, the ISO week just ended.
END_OF_LAST_WEEK = "--end=$(date -u +%Y-%m-%dT00:00:00Z)"
SERVER = "tritonwatch-report-archive"  # the Deployment and Service that serve the archive
SERVER_PORT = 8080
# Where readers open the archive: kubectl -n <namespace> port-forward svc/tritonwatch-report-archive 8080:80
# on their own machine. An Ingress's address goes in the Secret as TRITONWATCH_REPORT_URL instead.
REPORT_URL = "http://localhost:8080"
REPORT_URL_FLAG = f"--report-url=${{TRITONWATCH_REPORT_URL:-{REPORT_URL}}}"


def _labels(component: str = "report") -> dict[str, str]:
    return {"app.kubernetes.io/name": "tritonwatch", "app.kubernetes.io/component": component}


# Functions, not shared dicts: a dict used twice is written as a YAML anchor and alias.
def _secure() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def _pod_security() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": USER_ID,
        "runAsGroup": USER_ID,
        "fsGroup": USER_ID,  # the archive volume is writable by the report's user
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def archive_claim(size: str = ARCHIVE_SIZE) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": ARCHIVE_CLAIM, "labels": _labels()},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}},
    }


def report_args(prometheus_url: str) -> list[str]:
    """The report's flags (after ``--end``, which the shell works out at run time)."""
    return [f"--prometheus={prometheus_url}", f"--archive={ARCHIVE_PATH}", f"--slo={SLO_PATH}", "--days=7"]


def slo_configmap(slo_text: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": SLO_CONFIGMAP, "labels": _labels()},
        "data": {"slo.yaml": slo_text},
    }


def cronjob(prometheus_url: str, schedule: str = SCHEDULE) -> dict[str, Any]:
    container = {
        "name": "report",
        "image": IMAGE,
        # sh works out the end and the report URL (the Secret's, else the port-forward's); "$@" passes
        # the flags below unchanged (no word splitting, no eval).
        "command": [
            "sh",
            "-c",
            f'exec tritonwatch report "{END_OF_LAST_WEEK}" "{REPORT_URL_FLAG}" "$@"',
            "tritonwatch-report",
        ],
        "args": report_args(prometheus_url),
        "envFrom": [{"secretRef": {"name": SECRET, "optional": True}}],
        # matplotlib writes its cache under the home directory: a writable one, the root stays read-only.
        "env": [{"name": "MPLCONFIGDIR", "value": "/tmp/matplotlib"}, {"name": "HOME", "value": "/tmp"}],
        "volumeMounts": [
            {"name": "archive", "mountPath": ARCHIVE_PATH},
            {"name": "slo", "mountPath": SLO_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
        "resources": {
            "requests": {"cpu": "250m", "memory": "512Mi"},
            "limits": {"memory": "2Gi"},
        },
        "securityContext": _secure(),
    }
    pod = {
        "restartPolicy": "Never",
        "securityContext": _pod_security(),
        # The claim is ReadWriteOnce: attached to the node where the archive's server runs.
        "affinity": {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": _labels("report-archive")},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        },
        "containers": [container],
        "volumes": [
            {"name": "archive", "persistentVolumeClaim": {"claimName": ARCHIVE_CLAIM}},
            {"name": "slo", "configMap": {"name": SLO_CONFIGMAP}},
            {"name": "tmp", "emptyDir": {}},
        ],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": NAME, "labels": _labels()},
        "spec": {
            "schedule": schedule,
            "timeZone": TIME_ZONE,
            "concurrencyPolicy": "Forbid",
            # A run missed by up to 6 hours (a control plane upgrade) still runs that Monday.
            "startingDeadlineSeconds": 6 * 3600,
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {
                "spec": {
                    "backoffLimit": 2,
                    "activeDeadlineSeconds": 3600,
                    "template": {"metadata": {"labels": _labels()}, "spec": pod},
                }
            },
        },
    }


def archive_server() -> dict[str, Any]:
    """The archive over HTTP, read-only: ``/<week>/report.html`` (and a folder listing of the weeks)."""
    container = {
        "name": "archive",
        "image": IMAGE,
        "command": ["python", "-m", "http.server", str(SERVER_PORT), "--directory", ARCHIVE_PATH],
        "ports": [{"name": "http", "containerPort": SERVER_PORT}],
        "readinessProbe": {"httpGet": {"path": "/", "port": "http"}},
        "volumeMounts": [{"name": "archive", "mountPath": ARCHIVE_PATH, "readOnly": True}],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
        "securityContext": _secure(),
    }
    pod = {
        "securityContext": _pod_security(),
        "containers": [container],
        "volumes": [
            {"name": "archive", "persistentVolumeClaim": {"claimName": ARCHIVE_CLAIM, "readOnly": True}}
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": SERVER, "labels": _labels("report-archive")},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": _labels("report-archive")},
            # One pod at a time: the claim is ReadWriteOnce.
            "strategy": {"type": "Recreate"},
            "template": {"metadata": {"labels": _labels("report-archive")}, "spec": pod},
        },
    }


def archive_service() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": SERVER, "labels": _labels("report-archive")},
        "spec": {
            "selector": _labels("report-archive"),
            "ports": [{"name": "http", "port": 80, "targetPort": "http"}],
        },
    }


def manifests(prometheus_url: str, slo_text: str, schedule: str = SCHEDULE) -> list[dict[str, Any]]:
    """The SLO file's ConfigMap, the archive's claim, its server, then the CronJob."""
    return [
        slo_configmap(slo_text),
        archive_claim(),
        archive_server(),
        archive_service(),
        cronjob(prometheus_url, schedule),
    ]
