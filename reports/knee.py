"""SLO-bound capacity: the request rate at which a model's latency objective stops being met.

Method (``METHOD``, stated in the report): the period's 5-minute points of (request rate, requests
within the latency threshold, requests sampled) are binned by request rate (``BINS`` equal-width bins
between the lowest and the highest rate seen); each bin's good ratio is its requests within the
threshold over its sampled requests, pooled (not a mean of ratios), and a bin with fewer sampled
requests than the objective's ``min_samples`` is left out. The capacity is where the good ratio first
falls below the objective going up in load, interpolated linearly between the last bin that meets it
and the first that does not. The data cannot tell when every bin meets the objective (the knee lies
above the loads seen) or when the lowest bin already misses it (latency is not bound by load): the
report then falls back to the declared capacity or to GPU utilisation reaching 100 %.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

BINS = 20
MIN_POINTS = 3  # 5-minute points a bin needs (with min_samples requests) to count

METHOD = (
    "Where a model has a latency objective, its capacity is the request rate at which that objective "
    f"stops being met: the period's 5-minute points are binned by request rate ({BINS} equal bins), each "
    "bin's share of requests within the threshold is pooled from the latency histogram, and the "
    "capacity is where that share first falls below the objective as load rises (interpolated between "
    "the last bin that meets it and the first that does not). Where every bin meets the objective, or "
    "the lowest already misses it, the data cannot tell: the declared capacity or GPU utilisation "
    "reaching 100 % is used instead."
)


@dataclass(frozen=True)
class Knee:
    rate: float | None  # req/s where the objective stops being met; None: the data cannot tell
    reason: str  # how it was found, or why not
    bins: pd.DataFrame  # rate (mean of the bin), good_ratio, samples, points: for the chart and checks


def slo_capacity(
    rate: pd.Series, good: pd.Series, total: pd.Series, objective: float, min_samples: int, window_s: float
) -> Knee:
    """``rate``: requests/s; ``good``, ``total``: sampled requests/s within the threshold and in all,
    each a 5-minute series (``window_s`` long windows); ``objective`` a ratio (0.99)."""
    df = pd.concat({"rate": rate, "good": good, "total": total}, axis=1, join="inner").dropna()
    df = df[(df["total"] > 0) & np.isfinite(df["rate"])]
    empty = pd.DataFrame(columns=["rate", "good_ratio", "samples", "points"])
    if len(df) < 2 * MIN_POINTS:
        return Knee(None, "too few 5-minute points with sampled latencies", empty)
    lo, hi = float(df["rate"].min()), float(df["rate"].max())
    if not hi > lo:
        return Knee(None, f"the request rate did not vary (always {lo:.3g} req/s)", empty)
    edges = np.linspace(lo, hi, BINS + 1)
    which = np.clip(np.searchsorted(edges, df["rate"].to_numpy(), side="right") - 1, 0, BINS - 1)
    grouped = df.assign(bin=which).groupby("bin")
    bins = pd.DataFrame(
        {
            "rate": grouped["rate"].mean(),
            "good_ratio": grouped["good"].sum() / grouped["total"].sum(),
            "samples": grouped["total"].sum() * window_s,
            "points": grouped["rate"].count(),
        }
    )
    bins = bins[(bins["samples"] >= min_samples) & (bins["points"] >= MIN_POINTS)].sort_values("rate")
    if bins.empty:
        return Knee(None, f"no load bin holds {min_samples} sampled requests", bins)
    below = np.nonzero(bins["good_ratio"].to_numpy() < objective)[0]
    if below.size == 0:
        return Knee(
            None, f"the objective was met at every load seen (up to {bins['rate'].iloc[-1]:.3g} req/s)", bins
        )
    i = int(below[0])
    if i == 0:
        return Knee(
            None, f"the objective was missed even at the lowest load ({bins['rate'].iloc[0]:.3g} req/s)", bins
        )
    (x0, g0), (x1, g1) = bins[["rate", "good_ratio"]].iloc[i - 1], bins[["rate", "good_ratio"]].iloc[i]
    x = float(x0 + (g0 - objective) / (g0 - g1) * (x1 - x0)) if g0 != g1 else float(x0)
    assert math.isfinite(x)
    return Knee(
        x,
        f"{objective * 100:g} % of requests within the threshold up to {x0:.3g} req/s, "
        f"{g1 * 100:.2f} % at {x1:.3g} req/s",
        bins,
    )
