"""``tritonwatch k8s``: the generated rules, Alertmanager config, dashboards and autoscalers as
Kubernetes objects for the Prometheus Operator (kube-prometheus-stack), KEDA and prometheus-adapter.

The folder also holds the hand-written manifests (``kubernetes/``, ``autoscaling/``, ``triton265/``):
data beside the code, not packages. ``k8s`` is the command; ``render`` the YAML and naming helpers;
``manifests`` the PrometheusRules, dashboard ConfigMaps and Alertmanager Secret; ``amconfig`` the
AlertmanagerConfig; ``scaling`` the autoscaling overlays' files; ``operator_rules`` the rules it packs
(namespace in the grouping, for the operator's routing); ``receivers`` the warning for receivers that
would drop pages; ``base`` the hand-written kustomizations, from package data; ``report`` the CronJob.
"""
