"""The operator's own configuration, from INFERSCALE_* environment variables (and the
`inferscale operator run` flags, which override them). The tick, window and staleness fields, with
their defaults, come from `settings.ScalingSettings`, which the simulator reads too."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from inferscale.prometheus import PrometheusConfig
from inferscale.promql import QueryOptions
from inferscale.settings import ScalingSettings


class OperatorConfig(ScalingSettings, BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INFERSCALE_", frozen=True, extra="ignore")

    prometheus_url: Annotated[
        str | None, Field(description="Prometheus HTTP API base URL. Unset: reconcile only, no autoscaling.")
    ] = None
    prometheus_bearer_token_file: Path | None = None
    prometheus_ca_file: Path | None = None
    prometheus_timeout_seconds: Annotated[float, Field(gt=0, le=300)] = 10.0
    resync_seconds: Annotated[
        float,
        Field(gt=0, le=3600, description="How often every child is compared with its rendering (missed events)."),
    ] = 60.0
    metrics_port: Annotated[
        int | None, Field(ge=1, le=65535, description="Serve the operator's own Prometheus metrics here.")
    ] = None

    def prometheus(self) -> PrometheusConfig | None:
        if self.prometheus_url is None:
            return None
        return PrometheusConfig(
            url=self.prometheus_url,
            bearer_token_file=self.prometheus_bearer_token_file,
            ca_file=self.prometheus_ca_file,
            timeout_seconds=self.prometheus_timeout_seconds,
        )

    def query_options(self) -> QueryOptions:
        return QueryOptions(window_seconds=self.ttft_window_seconds, max_sample_age_seconds=self.stale_after_seconds)
