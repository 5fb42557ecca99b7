"""The simulated engine: a continuous-batching model (``model``) on named profiles (``profiles``) with a prefix
cache (``prefix_cache``), served over vLLM/TGI/SGLang/llama.cpp HTTP APIs (``api``, ``api_llamacpp``) with
their Prometheus metrics (``metrics``) by ``server`` (the ``simengine`` command); ``runtime`` joins the model
to a wall clock, ``tokens`` says how it counts tokens."""
