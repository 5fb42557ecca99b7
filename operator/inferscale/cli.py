"""The `inferscale` command: run the operator, generate the CRD and the field reference."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pydantic import ValidationError

from inferscale.settings import SCALING


def _run_operator(args: argparse.Namespace) -> int:
    import kopf
    from prometheus_client import start_http_server

    import inferscale.handlers  # noqa: F401  (registers the handlers with kopf)
    from inferscale import leader, telemetry
    from inferscale.config import OperatorConfig
    from inferscale.kube import Kube

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
    lease = args.lease.split("/") if args.lease else None
    if lease is not None and (len(lease) != 2 or not all(lease)):
        print(f"inferscale: --lease must be NAMESPACE/NAME, not {args.lease!r}", file=sys.stderr)
        return 2
    kopf.configure(verbose=args.verbose, log_format=kopf.LogFormat.PLAIN)
    # Served from the start, so a replica standing by is a healthy scrape target too.
    if config.metrics_port:
        start_http_server(config.metrics_port)
    elector = None
    if lease is not None:
        elector = leader.Elector(Kube.from_environment(), lease[0], lease[1], identity=leader.new_identity())
        telemetry.LEADER.set(0)
        with leader.standby_probe(args.liveness):
            elector.acquire()
        elector.keep(on_lost=leader.stop_self)
    telemetry.LEADER.set(1)
    namespaces = args.namespace or []
    try:
        kopf.run(
            clusterwide=not namespaces,
            namespaces=namespaces,
            standalone=True,  # one replica runs at a time through --lease, not kopf's peering
            liveness_endpoint=args.liveness,
            memo=kopf.Memo(config=config),
        )
    finally:
        if elector is not None:
            elector.release()
    return 1 if elector is not None and elector.lost else 0


def _write_or_check(paths: list[Path], text: str, command: str, *, check: bool) -> int:
    """Write `text` to each path, or with `check` report the paths whose content differs."""
    if check:
        stale = [path for path in paths if not path.exists() or path.read_text() != text]
        for path in stale:
            print(f"{path} is stale: run `{command}` and commit the result", file=sys.stderr)
        if stale:
            return 1
        print(f"{', '.join(map(str, paths))} current")
        return 0
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")
    return 0


def _generate_crd(args: argparse.Namespace) -> int:
    from inferscale import crd

    paths = [Path(output) for output in args.output] if args.output else list(crd.CRD_FILES)
    return _write_or_check(paths, crd.render_yaml(), "inferscale crd generate", check=args.check)


def _generate_docs(args: argparse.Namespace) -> int:
    from inferscale import reference

    paths = [Path(output) for output in args.output] if args.output else [reference.REFERENCE_FILE]
    return _write_or_check(paths, reference.render_markdown(), "inferscale docs generate", check=args.check)


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
    run.add_argument(
        "--tick-seconds",
        type=float,
        help=f"scaling tick period (env INFERSCALE_TICK_SECONDS, default {SCALING.tick_seconds:g})",
    )
    run.add_argument("--metrics-port", type=int, help="serve the operator's own metrics (env INFERSCALE_METRICS_PORT)")
    run.add_argument(
        "--lease",
        metavar="NAMESPACE/NAME",
        help="run only while holding this Lease (leader election: of several replicas one runs, the others wait)",
    )
    run.set_defaults(func=_run_operator)

    crd_cmd = commands.add_parser("crd", help="the InferenceService CRD").add_subparsers(dest="action", required=True)
    generate = crd_cmd.add_parser("generate", help="write the CRD generated from the pydantic models")
    generate.add_argument(
        "--output",
        "-o",
        action="append",
        help="file to write (repeatable); default: crds/inferenceservice.yaml and the Helm chart's copy",
    )
    generate.add_argument("--check", action="store_true", help="fail if the file differs from the models")
    generate.set_defaults(func=_generate_crd)

    docs_cmd = commands.add_parser("docs", help="the generated documentation").add_subparsers(
        dest="action", required=True
    )
    docs = docs_cmd.add_parser("generate", help="write docs/reference.md, the field reference, from the models")
    docs.add_argument("--output", "-o", action="append", help="file to write (repeatable); default: docs/reference.md")
    docs.add_argument("--check", action="store_true", help="fail if the file differs from the models")
    docs.set_defaults(func=_generate_docs)

    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
