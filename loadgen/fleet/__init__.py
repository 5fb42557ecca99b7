"""The fleet simulator: replicas of the engine model behind a balancer in simulated time (``sim``), the
scaling policies it runs (``policies``: inferscale's own, static peak, HPA, KEDA, raise-batch, the oracle;
``baselines``: WVA, Dynamo, Knative) and their comparison on one trace (``compare``)."""
