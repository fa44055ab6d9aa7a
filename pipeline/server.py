"""`python -m pipeline.server [--port 5000] [--host 127.0.0.1 [--public]]`: serve the project's MLflow store over HTTP.

Runs `mlflow server` on the project's SQLite store (<project root>/mlflow.db) with its artifact
root (<project root>/mlartifacts), bound to 127.0.0.1 unless --host says otherwise. The server has no
authentication: anyone who reaches it can read, change and delete every run. So an address beyond this machine
(0.0.0.0, a network interface) is served only with --public, and with a warning that names MLflow's own
authentication (`mlflow server --app-name basic-auth`). Then point the pipeline at it, from any directory, DVC queue
or Hydra sweep:

    export MLFLOW_TRACKING_URI=http://127.0.0.1:5000

Runs logged through the server and runs logged straight into the SQLite store land in the same
place (same store, same artifact folder), so both views agree. Stop the server with Ctrl+C.

    python -m pipeline.server --port 5001 --workers 1
    python -m pipeline.server --host 0.0.0.0 --public   # every interface (a trusted network only)
    python -m pipeline.server --backend-store-uri sqlite:////data/team/mlflow.db   # another store
    python -m pipeline.server --backend-store-uri postgresql://USER:PASSWORD@HOST:5432/mlflow   # a team's
      database (pip install -e ".[postgres]"); the password is never printed
"""

from __future__ import annotations

import argparse
import errno
import os
import socket
import sys
from pathlib import Path

from pipeline.base.errors import PipelineError
from pipeline.base.secrets import redact_password as redacted  # a URI's password as ***


def loopback(host: str) -> bool:
    """Whether every address `host` names is this machine's loopback (127.0.0.0/8, ::1): reachable from here only."""
    import ipaddress

    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)}
    except OSError:
        return False  # check_port says what is wrong with it
    return bool(addresses) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses)


def reachable_address(host: str) -> str:
    """An address of this machine that others can use for `host`: `host` itself, or for 0.0.0.0 / :: (every
    interface) the address of the interface this machine reaches other networks through (no packet is sent)."""
    import ipaddress

    try:
        unspecified = ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return host  # a name
    if not unspecified:
        return host
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: routing decides the interface; UDP connect sends nothing
            return probe.getsockname()[0]
    except OSError:
        try:
            return socket.gethostbyname(socket.gethostname())
        except OSError:
            return "127.0.0.1"


# The Host headers `mlflow server` answers unless told otherwise (--allowed-hosts): loopback and private networks
# (RFC 1918, RFC 4193)
DEFAULT_ALLOWED_NETWORKS = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")


def answered_by_default(address: str) -> bool:
    """Whether `mlflow server` answers requests for `address` without --allowed-hosts."""
    import ipaddress

    if address == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False  # a name
    return ip.is_loopback or any(ip in ipaddress.ip_network(n) for n in DEFAULT_ALLOWED_NETWORKS)


def url_of(address: str, port: int) -> str:
    return f"http://[{address}]:{port}" if ":" in address else f"http://{address}:{port}"


def exposure_warning(store: str, host: str, port: int) -> str:
    return (
        f"warning: the MLflow server on {host}:{port} has no authentication: anyone who reaches this machine's port "
        f"{port} can read, change and delete every run and artifact of {redacted(store)}. Serve it on a trusted "
        "network only, or run MLflow with its authentication instead (`mlflow server --app-name basic-auth`, with "
        "`pip install mlflow[auth]`: users and passwords; see MLflow's docs, 'Authentication')."
    )


def server_command(artifact_root: Path, host: str, port: int, workers: int, allowed: str | None = None) -> list[str]:
    """The `mlflow server` command line (argv) for an artifact folder; the store goes in the environment
    (MLFLOW_BACKEND_STORE_URI), so that a database password stays out of `ps`. allowed: MLflow's --allowed-hosts
    (the Host headers it answers), when the printed address is not one it allows by default (loopback, private)."""
    return [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        # new experiments keep artifacts in the same folder a local-store run would use, and the
        # server proxies mlflow-artifacts:/ URIs there too (nothing lands in the server's cwd)
        "--default-artifact-root",
        artifact_root.as_uri(),
        "--artifacts-destination",
        artifact_root.as_uri(),
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        str(workers),
        *(["--allowed-hosts", allowed] if allowed else []),
    ]


DATABASES = ("sqlite:////", "postgresql://", "postgresql+")


def with_driver(store_uri: str) -> str:
    """postgresql://... -> postgresql+psycopg2://... (SQLAlchemy 2.1 would take psycopg 3, which the `postgres`
    extra does not install); a URI naming its driver is kept."""
    return (
        "postgresql+psycopg2://" + store_uri[len("postgresql://") :]
        if store_uri.startswith("postgresql://")
        else store_uri
    )


def check_driver(store_uri: str) -> None:
    """A PostgreSQL store needs psycopg2 (the `postgres` extra): say so before mlflow's traceback would."""
    if store_uri.startswith("postgresql+psycopg2://"):
        try:
            import psycopg2  # noqa: F401
        except ImportError:
            raise PipelineError(
                f"{redacted(store_uri)}: a PostgreSQL store needs psycopg2: "
                'pip install -c constraints.txt -e ".[postgres]"'
            ) from None


def check_port(host: str, port: int) -> None:
    """Refuse an address `mlflow server` could not listen on, before the link is printed: on a port in use the link
    would open whatever listens there (another project's server), and `mlflow server` would give up later with exit
    status 0 (docs/benchmarks-measurements.md#outside-the-project). Port 0 would print a link to port 0."""
    if not 0 < port < 65536:
        raise PipelineError(f"--port {port}: expected a port from 1 to 65535 (the printed link names it), e.g. 5000")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no conflict
            sock.bind(address)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise PipelineError(
                f"{host}:{port} is in use (another MLflow server?): choose a free port, e.g. --port {port + 1}, "
                f"or open the server already there"
            ) from None
        raise PipelineError(
            f"--host {host}: cannot listen there ({exc.strerror or exc}): give a name or address of this machine, "
            "e.g. 127.0.0.1"
        ) from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.server",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n", 1)[1].strip(),  # the description is its first line: printed once
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1: this machine only)")
    parser.add_argument(
        "--public",
        action="store_true",
        help="serve on a --host beyond this machine (0.0.0.0, a network interface): the store has no authentication",
    )
    parser.add_argument("--port", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=2, help="server processes (default 2)")
    parser.add_argument(
        "--backend-store-uri",
        default=None,
        help="an absolute sqlite://// URI or a postgresql:// one (default: the project's mlflow.db; "
        "$MLFLOW_TRACKING_URI is ignored here, it is what clients use)",
    )
    parser.add_argument("--experiment", default="positional-encoding", help="created now if missing")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        store, artifact_uri, experiment_id = _checked_store(args)
    except (PipelineError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return _serve(args, store, Path(artifact_uri[len("file://") :]), experiment_id)


def _checked_store(args: argparse.Namespace) -> tuple[str, str, str]:
    """(backend store URI with its driver, artifact location, experiment id), after refusing what cannot serve."""
    from pipeline.base.paths import mlflow_db, project_root
    from pipeline.outputs.tracking import artifact_location, prepare_store

    root = project_root()
    store = args.backend_store_uri or f"sqlite:///{mlflow_db(root)}"
    if not store.startswith(DATABASES):
        raise PipelineError(
            f"--backend-store-uri {redacted(store)!r}: expected an absolute "
            "sqlite:////path/to/mlflow.db URI or postgresql://user:password@host:port/database"
        )
    store = with_driver(store)
    check_driver(store)
    if not loopback(args.host) and not args.public:
        raise PipelineError(
            f"--host {args.host} serves the MLflow store {redacted(store)} beyond this machine, without "
            "authentication: anyone who reaches it can read, change and delete every run. Fix: add --public to "
            "serve it on a trusted network, or leave --host out (127.0.0.1: this machine only); for users and "
            "passwords run MLflow with its authentication (`mlflow server --app-name basic-auth`)."
        )
    check_port(args.host, args.port)
    artifact_uri = artifact_location(store, root)
    # create the tables and the experiment once, before several server workers race to do it
    return store, artifact_uri, prepare_store(store, args.experiment, root)


def _serve(args: argparse.Namespace, store: str, artifact_root: Path, experiment_id: str) -> int:
    """Run `mlflow server` (serve), printing where it answers once it does."""
    from pipeline.outputs.tracking import runs_page

    exposed = not loopback(args.host)
    address = reachable_address(args.host)
    allowed = None
    if not answered_by_default(address):
        allowed = ",".join([address, f"{address}:{args.port}", "localhost", "localhost:*", "127.0.0.1", "127.0.0.1:*"])
    cmd = server_command(artifact_root, args.host, args.port, args.workers, allowed)
    url = url_of(address, args.port)
    if exposed:
        print(exposure_warning(store, args.host, args.port), file=sys.stderr, flush=True)
    links = (
        f"MLflow server for {redacted(store)} (artifacts in {artifact_root}) on {url}"
        + (f" (bound to {args.host})" if address != args.host else "")
        + "\n"
        f"  use it: export MLFLOW_TRACKING_URI={url}\n"
        f"  browse the runs of {args.experiment}: {runs_page(url, experiment_id)}\n"
        f'  (other links, {url} too, open in MLflow\'s GenAI mode until the browser picks "Model training" '
        "in the sidebar once)"
    )
    # MLflow's job runner (GenAI scorers and evaluations, which the project does not use) starts 8 more processes, each
    # importing MLflow: off unless set (docs/benchmarks-measurements.md#the-mlflow-server)
    env = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", **os.environ, "MLFLOW_BACKEND_STORE_URI": store}
    return serve(cmd, env, url, links)


def serve(cmd: list[str], env: dict, url: str, links: str) -> int:
    """Run `mlflow server` (cmd) as a child, print `links` once its /health answers (a link printed earlier opens on
    an error page: a loaded machine has taken minutes to start it), then wait for it; returns its exit status.
    SIGINT, SIGTERM and SIGHUP to this process reach the server too (Ctrl+C reaches both anyway); a stop ends with one
    line and the signal's status (130, 143, 129)."""
    import signal
    import subprocess
    import time
    import urllib.request

    print(f"starting the MLflow server on {url} (its links follow once it answers) ...", file=sys.stderr, flush=True)
    server, stops = subprocess.Popen(cmd, env=env), []

    def forward(signum, frame) -> None:
        stops.append(signal.Signals(signum))
        if server.poll() is None:
            server.send_signal(signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through $HTTP_PROXY
    while server.poll() is None:
        try:
            with direct.open(url + "/health", timeout=2) as response:
                if response.read().strip() == b"OK":
                    print(links, flush=True)
                    break
        except OSError:  # not listening yet, or not answering yet
            time.sleep(0.25)
    status = server.wait()
    if stops:
        print(f"interrupted by {stops[0].name}: stopped the MLflow server on {url}", file=sys.stderr)
        return 128 + stops[0]
    if status and status > 0:
        print(f"error: the MLflow server exited with status {status} (its own message is above)", file=sys.stderr)
    return status if status >= 0 else 128 - status  # killed by a signal: the shell's convention


if __name__ == "__main__":
    raise SystemExit(main())
