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
  (optional: without it the report is only archived); nothing secret is in these manifests.

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


def _labels() -> dict[str, str]:
    return {"app.kubernetes.io/name": "tritonwatch", "app.kubernetes.io/component": "report"}


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
        # sh works out the end; "$@" passes the flags below unchanged (no word splitting, no eval).
        "command": ["sh", "-c", f'exec tritonwatch report "{END_OF_LAST_WEEK}" "$@"', "tritonwatch-report"],
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
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    pod = {
        "restartPolicy": "Never",
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": USER_ID,
            "runAsGroup": USER_ID,
            "fsGroup": USER_ID,  # the archive volume is writable by the report's user
            "seccompProfile": {"type": "RuntimeDefault"},
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


def manifests(prometheus_url: str, slo_text: str, schedule: str = SCHEDULE) -> list[dict[str, Any]]:
    """The SLO file's ConfigMap, the archive's claim, then the CronJob."""
    return [slo_configmap(slo_text), archive_claim(), cronjob(prometheus_url, schedule)]
