"""Measuring a live target: the HTTP/1.1 streaming wire (``wire``), open- and closed-loop runs (``runner``), the
concurrency knee (``knee``) and rate sweep (``rate_sweep``), SLOs and goodput (``slo``), percentiles
(``stats``), reports (``report``) and the engine's own series from Prometheus (``prom_report``)."""
