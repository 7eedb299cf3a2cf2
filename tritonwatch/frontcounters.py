"""A front's request counters (``availability.from``): the errors and all responses of the ingress, proxy
or gateway in front of Triton, which sees every response (Triton does not count a python model's error
responses). The selectors are parsed and validated by ``tritonwatch.selector``."""

from __future__ import annotations

from dataclasses import dataclass

from tritonwatch.selector import Selector


@dataclass(frozen=True)
class FrontCounters:
    """Counters of a component in front of Triton (ingress, proxy, gateway) that sees every response.

    Used instead of Triton's own counters, which do not count a python model's error responses.
    """

    errors: Selector
    total: Selector

    def error_ratio_promql(self, window: str, grouping: tuple[str, ...] = (), fn: str = "rate") -> str:
        """Errors over all responses over ``window`` (``fn``: rate or increase, the ratio is the same).

        Summed by the grouping labels only: the front's series do not name the model. A front that
        creates its error series with the first error (Envoy, NGINX) reads 0 until then, not nothing.
        """
        by = f"sum by ({', '.join(grouping)}) " if grouping else "sum"
        errors = f"{by}({fn}({self.errors.promql()}[{window}]))"
        total = f"{by}({fn}({self.total.promql()}[{window}]))"
        return f"(\n  {errors}\nor\n  0 * {total}\n)\n/\n{total}"

    def requests_promql(self, window: str, grouping: tuple[str, ...] = ()) -> str:
        """The responses the front counted over ``window`` (the ratio's denominator)."""
        by = f"sum by ({', '.join(grouping)}) " if grouping else "sum"
        return f"{by}(increase({self.total.promql()}[{window}]))"
