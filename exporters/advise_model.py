"""The one door from the sidecar to ``tritonwatch advise``'s model of the server (docs/advise.md).

The headroom part (exporters/headroom.py) reads the config, fits compute = a + b x batch and
simulates the dynamic batcher exactly as ``advise`` does; everything it takes of advise passes here,
so that moving advise is one import to change.
"""

from __future__ import annotations

from tritonwatch.advise.observed import Batching, Fit, Refusal, batching, fit
from tritonwatch.advise.simulate import Objective, slo_capacity

__all__ = ["Batching", "Fit", "Objective", "Refusal", "batching", "fit", "slo_capacity"]
