#!/usr/bin/env bash
# A private PostgreSQL server for the team-server test (tests/test_cluster.py): Debian's `postgresql`, a
# database cluster of its own in $PE_CI_PGDATA (default /var/tmp/pe-ci-postgres), listening on 127.0.0.1:$PE_CI_PGPORT
# (default 55432) only, with a password role `pe` (password `pe`) that may create databases. Idempotent:
# installs only what is missing, initialises the cluster once, starts it only when it is not running. It never
# touches the system's own clusters. Prints the URI the tests take as PE_TEST_POSTGRES_URI; the server's PID
# is appended to the file $1 (none by default: it keeps running) for .ci/run to stop at its end.
set -euo pipefail
pids=${1:-/dev/null}
data=${PE_CI_PGDATA:-/var/tmp/pe-ci-postgres}
port=${PE_CI_PGPORT:-55432}

if [ "$(id -u)" != 0 ]; then echo "postgres-up: needs root; the PostgreSQL test will be skipped" >&2; exit 1; fi
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    command -v apt-get >/dev/null || { echo "postgres-up: no apt-get to install postgresql" >&2; exit 1; }
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
as_pg() { runuser -u postgres -- "$@"; }

if [ ! -f "$data/PG_VERSION" ]; then
    mkdir -p "$data"
    chown postgres: "$data"
    chmod 700 "$data"
    pwfile=$(mktemp)
    echo pe >"$pwfile"
    chown postgres: "$pwfile"
    as_pg "$bin/initdb" -D "$data" -U pe --pwfile="$pwfile" --auth-host=scram-sha-256 --auth-local=scram-sha-256 \
        -E UTF8 --locale=C.UTF-8 >/dev/null
    rm -f "$pwfile"
fi
if ! as_pg "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    as_pg "$bin/pg_ctl" -D "$data" -l "$data/server.log" -w start \
        -o "-p $port -k $data -c listen_addresses=127.0.0.1" >/dev/null
    head -1 "$data/postmaster.pid" >>"$pids"
fi
echo "postgresql://pe:pe@127.0.0.1:$port/postgres"
