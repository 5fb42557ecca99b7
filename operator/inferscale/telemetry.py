"""The operator's own Prometheus metrics: decisions, tick duration, query errors, leadership."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

DECISIONS = Counter(
    "inferscale_scaling_decisions_total",
    "Scaling decisions, by service and the policy's reason.",
    ["namespace", "service", "reason"],
)
SCALE_EVENTS = Counter(
    "inferscale_scale_events_total",
    "Replica changes the operator made, by direction.",
    ["namespace", "service", "direction"],
)
DESIRED_REPLICAS = Gauge(
    "inferscale_desired_replicas", "Replicas the operator wants, by service.", ["namespace", "service"]
)
TICK_SECONDS = Histogram(
    "inferscale_tick_duration_seconds",
    "Wall time of one scaling tick for all services.",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
)
QUERY_ERRORS = Counter(
    "inferscale_prometheus_query_errors_total", "Ticks whose Prometheus queries failed, by error type.", ["error"]
)
LEADER = Gauge(
    "inferscale_leader", "1 while this replica runs the operator, 0 while it stands by for the leader Lease."
)
