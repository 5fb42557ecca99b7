"""loadgen: simulated LLM engines, open-loop traffic and its reports, and fleet simulation.

One subpackage per job; imports point down this list, and to the operator's pure core (never the other way):

* ``cli``: the ``loadgen`` command (run, knee, sweep, simulate).
* ``fleet``: many engine models behind a balancer in simulated time, under each scaling policy.
* ``client``: the open-loop streaming client, the knee and rate sweeps, SLOs, reports.
* ``traffic``: arrival shapes, request lengths, prompt content, trace replay.
* ``engine``: the simulated vLLM/TGI/SGLang/llama.cpp engine: its model, profiles, HTTP APIs and server.
"""
