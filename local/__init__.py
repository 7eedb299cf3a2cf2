"""The local stack: the bundled real Triton, the load driver, Prometheus/Alertmanager, the demo.

A leaf: it stands on the core (``tritonwatch.catalog``, ``expfmt``, ``errors``...) and may use the
sidecar (``tritonwatch.exporters``); nothing in the core or the sidecar imports it.
"""
