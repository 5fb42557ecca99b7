"""loadgen: simulated vLLM/TGI engines, open-loop traffic, reports and fleet simulation."""
