"""The local cluster's Python harness: a simengine per engine pod (``podrunner``), the closed-loop step test
(``validate``), local processes (``processes``), and the real Prometheus plus engine-shaped exporters that
tests and benches share (``testing``). Imports loadgen and the operator; nothing in either imports it."""
