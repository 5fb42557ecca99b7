"""The `inferscale` command: run the operator, generate the CRD."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pydantic import ValidationError


def _run_operator(args: argparse.Namespace) -> int:
    import kopf

    import inferscale.handlers  # noqa: F401  (registers the handlers with kopf)
    from inferscale.config import OperatorConfig

    overrides = {
        "prometheus_url": args.prometheus_url,
        "tick_seconds": args.tick_seconds,
        "metrics_port": args.metrics_port,
    }
    try:
        config = OperatorConfig(**{key: value for key, value in overrides.items() if value is not None})
    except ValidationError as error:
        print(f"inferscale: invalid operator configuration: {error}", file=sys.stderr)
        return 2
    kopf.configure(verbose=args.verbose, log_format=kopf.LogFormat.PLAIN)
    namespaces = args.namespace or []
    kopf.run(
        clusterwide=not namespaces,
        namespaces=namespaces,
        standalone=True,
        liveness_endpoint=args.liveness,
        memo=kopf.Memo(config=config),
    )
    return 0


def _generate_crd(args: argparse.Namespace) -> int:
    from inferscale import crd

    path = Path(args.output)
    if args.check:
        current = path.read_text() if path.exists() else ""
        if current != crd.render_yaml():
            print(f"{path} is stale: run `inferscale crd generate` and commit the result", file=sys.stderr)
            return 1
        print(f"{path} is current")
        return 0
    crd.write(path)
    print(f"wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="inferscale", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    operator = commands.add_parser("operator", help="the Kubernetes operator").add_subparsers(
        dest="action", required=True
    )
    run = operator.add_parser("run", help="run the operator against the current kubeconfig or in-cluster config")
    run.add_argument("--namespace", "-n", action="append", help="watch only this namespace (repeatable); default: all")
    run.add_argument("--verbose", "-v", action="store_true", help="debug logging")
    run.add_argument("--liveness", default=None, help="serve a liveness probe, e.g. http://0.0.0.0:8080/healthz")
    run.add_argument("--prometheus-url", help="Prometheus base URL (env INFERSCALE_PROMETHEUS_URL); unset: no scaling")
    run.add_argument("--tick-seconds", type=float, help="scaling tick period (env INFERSCALE_TICK_SECONDS, default 15)")
    run.add_argument("--metrics-port", type=int, help="serve the operator's own metrics (env INFERSCALE_METRICS_PORT)")
    run.set_defaults(func=_run_operator)

    crd_cmd = commands.add_parser("crd", help="the InferenceService CRD").add_subparsers(dest="action", required=True)
    generate = crd_cmd.add_parser("generate", help="write the CRD generated from the pydantic models")
    generate.add_argument("--output", "-o", default="crds/inferenceservice.yaml")
    generate.add_argument("--check", action="store_true", help="fail if the file differs from the models")
    generate.set_defaults(func=_generate_crd)

    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
