"""The scaling loop's timing: the one home of its defaults.

The operator's configuration (`config.OperatorConfig`, which takes these fields from INFERSCALE_*
variables and flags), the PromQL the tick sends (`promql.QueryOptions`), the policy's defaults
(`policy.decide`) and the fleet simulator (`loadgen.fleet.sim`, `loadgen.fleet.compare`, `loadgen simulate`)
all read them from here, so a simulated tick sees what a deployed one does. Pure: no I/O, nothing of ours
imported.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class ScalingSettings(BaseModel):
    """How often the operator scales, over what window it reads TTFT and rates, and how old a sample may be."""

    model_config = ConfigDict(frozen=True)

    tick_seconds: Annotated[float, Field(gt=0, le=3600, description="How often all services are scaled.")] = 15.0
    # Eight scrapes at a 15 s scrape interval: enough samples for a steady rate() and histogram_quantile(),
    # short enough that a burst leaves the p95 soon after it is served.
    ttft_window_seconds: Annotated[int, Field(ge=2, le=3600, description="Range of the p95 TTFT and rate queries.")] = (
        120
    )
    stale_after_seconds: Annotated[
        float, Field(gt=0, le=3600, description="Engine samples older than this make the operator hold.")
    ] = 60.0

    @property
    def ttft_window(self) -> timedelta:
        return timedelta(seconds=self.ttft_window_seconds)

    @property
    def stale_after(self) -> timedelta:
        return timedelta(seconds=self.stale_after_seconds)


SCALING = ScalingSettings()
"""The defaults."""
