"""The autoscaling overlays' generated files (docs/headroom.md, "Autoscaling"): the SLO ConfigMap the
sidecars read, a KEDA ScaledObject, an ``autoscaling/v2`` HPA and prometheus-adapter's rule for it.

Both autoscalers read one query, scoped to the Deployment they scale (its namespace, and the jobs
the PodMonitor gives Triton's and the sidecar's endpoints), the busiest model setting the pace:

    max(
      rate of successful requests / SLO-bound capacity        per model with a capacity estimate
      or
      TARGET x objective percentile / objective threshold      per model with a latency objective
    )

The second term is the tail-latency signal (llm-d scales on P90 over its SLO likewise): it reaches
TARGET, the threshold both autoscalers hold the query at, when the model's objective percentile
reaches its threshold. It drives the models the capacity fit refuses (ensembles, sequence batcher, no
dynamic batching, too little data since a rollout) and guards the ones it models.

Failing safe: when the query has no answer (sidecars restarting, Prometheus down, no signal at all)
nothing scales down. KEDA (``ignoreNullValues: "false"``) counts an empty answer as a failure: it gives
the HPA no metric, which leaves the replica count as it is, and after ``FAILURE_THRESHOLD`` failures
applies its fallback (KEDA 2.18+: ``Value`` metrics; ``behavior`` since 2.17), ``currentReplicasIfHigher``
over ``MIN_REPLICAS``: the Deployment keeps the replicas it has (it never has fewer than the minimum).
The HPA gets no external metric from the adapter and leaves the replica count as it is.
"""

from __future__ import annotations

from decimal import Decimal

from tritonwatch import catalog
from tritonwatch.deploy.render import COMMAND, dump, labels
from tritonwatch.slo import SLOFile
from tritonwatch.validators import promql_string

DEPLOYMENT = "triton"
NAMESPACE = "triton"
# The jobs deploy/kubernetes/podmonitor.yaml gives Triton's endpoint and the sidecar's.
TRITON_JOB = "triton"
SIDECAR_JOB = "tritonwatch"
TARGET = "0.7"
MIN_REPLICAS, MAX_REPLICAS = 2, 10
FAILURE_THRESHOLD = 3
PROMETHEUS_URL = "http://prometheus-operated.monitoring.svc:9090"
EXTERNAL_METRIC = "tritonwatch_capacity_utilisation"
SLO_CONFIGMAP = "tritonwatch-slo"
SLO_CONFIGMAP_FILE = "sidecar-slo/slo-configmap.yaml"
KEDA_FILE = "keda/scaledobject.yaml"
HPA_FILE = "prometheus-adapter/hpa.yaml"
ADAPTER_FILE = "prometheus-adapter/values.yaml"
SIGNAL = "signal"  # label the query's terms carry: capacity or latency


def quantile_label(objective: Decimal) -> str:
    """An objective in percent as the sidecar's ``quantile`` label spells it (99 -> "0.99")."""
    return repr(float(objective / Decimal(100)))


def _scope(namespace: str, job: str) -> str:
    return f"namespace={promql_string(namespace)},job={promql_string(job)}"


def utilisation_promql(namespace: str) -> str:
    by = catalog.by_clause()
    rate = f"sum by ({by}) (rate({catalog.TRITON_SUCCESS}{{{_scope(namespace, TRITON_JOB)}}}[5m]))"
    capacity = f"sum by ({by}) ({catalog.CAPACITY}{{{_scope(namespace, SIDECAR_JOB)}}})"
    return f"{rate} / {capacity}"


def latency_promql(namespace: str, quantile: str) -> str:
    """TARGET x the models' ``quantile`` percentile over their threshold, for the models whose objective
    is that quantile (the sidecar's objective series says which); NaN (no requests) dropped."""
    sel = _scope(namespace, SIDECAR_JOB)
    percentile = catalog.histogram_quantile_promql(quantile, selector=sel)
    objective = (
        f"max by ({catalog.MODEL}) "
        f"({catalog.CAPACITY_OBJECTIVE}{{{sel},{catalog.QUANTILE}={promql_string(quantile)}}})"
    )
    return f"({percentile} / on ({catalog.MODEL}) group_left () {objective} >= 0) * {TARGET}"


def query(spec: SLOFile, namespace: str) -> str:
    quantiles = sorted(
        {quantile_label(s.latency.objective) for s in spec.slos if s.latency is not None}, key=float
    )
    terms = [f'label_replace({utilisation_promql(namespace)}, "{SIGNAL}", "capacity", "", "")']
    terms += [
        f'label_replace({latency_promql(namespace, q)}, "{SIGNAL}", "latency", "", "")' for q in quantiles
    ]
    return "max(\n  " + "\n  or\n  ".join(terms) + "\n)"


def autoscaling(
    spec: SLOFile, slo_text: str, namespace: str = NAMESPACE, command: str = COMMAND
) -> dict[str, str]:
    """Overlay file -> text: the SLO ConfigMap, the KEDA ScaledObject, the HPA and the adapter's rules."""
    q = query(spec, namespace)
    target = {"apiVersion": "apps/v1", "kind": "Deployment", "name": DEPLOYMENT}
    # Scale down slowly: capacity estimates move with each refresh, traffic with the hour.
    behavior = {"scaleDown": {"stabilizationWindowSeconds": 600}}
    scaled = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": DEPLOYMENT, "labels": labels("autoscaling")},
        "spec": {
            "scaleTargetRef": target,
            "minReplicaCount": MIN_REPLICAS,
            "maxReplicaCount": MAX_REPLICAS,
            "pollingInterval": 30,
            "cooldownPeriod": 300,
            # KEDA 2.18+: hold the replicas there are when the query fails or has no answer
            "fallback": {
                "failureThreshold": FAILURE_THRESHOLD,
                "replicas": MIN_REPLICAS,
                "behavior": "currentReplicasIfHigher",
            },
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": behavior}},
            "triggers": [
                {
                    "type": "prometheus",
                    "metricType": "Value",
                    "metadata": {
                        "serverAddress": PROMETHEUS_URL,
                        "query": q,
                        "threshold": TARGET,
                        # KEDA's default (true) reads an empty answer as 0: a scale-down to the minimum
                        "ignoreNullValues": "false",
                    },
                }
            ],
        },
    }
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": DEPLOYMENT, "labels": labels("autoscaling")},
        "spec": {
            "scaleTargetRef": target,
            "minReplicas": MIN_REPLICAS,
            "maxReplicas": MAX_REPLICAS,
            "metrics": [
                {
                    "type": "External",
                    "external": {
                        "metric": {"name": EXTERNAL_METRIC},
                        "target": {"type": "Value", "value": f"{round(float(TARGET) * 1000)}m"},
                    },
                }
            ],
            "behavior": behavior,
        },
    }
    url, port = PROMETHEUS_URL.rsplit(":", 1)
    values = {
        "prometheus": {"url": url, "port": int(port)},
        "rules": {
            "default": False,
            "external": [
                {
                    # the metric exists while the sidecars serve their objectives; the query is ours whole
                    "seriesQuery": f"{catalog.CAPACITY_OBJECTIVE}{{{_scope(namespace, SIDECAR_JOB)}}}",
                    "resources": {"namespaced": False},
                    "name": {"as": EXTERNAL_METRIC},
                    "metricsQuery": q,
                }
            ],
        },
    }
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": SLO_CONFIGMAP, "labels": labels("sidecar")},
        "data": {"slo.yaml": slo_text},
    }
    src = "the SLO file (--slo)"
    return {
        SLO_CONFIGMAP_FILE: dump([configmap], src, command=command),
        KEDA_FILE: dump([scaled], src, command=command),
        HPA_FILE: dump([hpa], src, command=command),
        ADAPTER_FILE: dump(
            [values],
            src,
            "# Helm values for prometheus-community/prometheus-adapter (helm install ... -f values.yaml)\n",
            command,
        ),
    }
