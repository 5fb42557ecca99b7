"""inferscale: serve LLMs on vLLM or TGI in Kubernetes, scaled in replicas to hold a TTFT SLO."""
