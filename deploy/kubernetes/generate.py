"""``tritonwatch k8s`` from a checkout: ``python deploy/kubernetes/generate.py --slo FILE ...`` runs
the command (tritonwatch/deploy/k8s.py) with the same flags; ``make generate`` runs the command."""

from __future__ import annotations

from tritonwatch.deploy.k8s import main

if __name__ == "__main__":
    raise SystemExit(main())
