#!/usr/bin/env bash
# A throwaway PostgreSQL server on loopback for the postgres test suite.
#
#   export HPO_TEST_POSTGRES_URL=$(bash .ci/postgres.sh start)   # prints only the URL on stdout
#   python -m pytest -m postgres
#   bash .ci/postgres.sh stop                                    # stops the server and deletes its data
#
# Its own cluster (data in $HPO_PG_DATA, default /tmp/hpo-postgres; port $HPO_PG_PORT, default a free one), so the
# machine's own PostgreSQL, if any, is left alone. Installs Debian's postgresql package when no server binaries exist.
set -euo pipefail

PORT=${HPO_PG_PORT:-}
DATA=${HPO_PG_DATA:-/tmp/hpo-postgres}
ROLE=hpo
PASSWORD=hpo
DATABASE=hpo_test

log() { echo "postgres.sh: $*" >&2; }

server_bin() {
  local found
  found=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -z "$found" ] && [ "$(id -u)" = 0 ]; then
    log "installing Debian's postgresql"
    apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2
    found=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  fi
  if [ -z "$found" ]; then
    log "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin; install the postgresql package"
    exit 1
  fi
  echo "$found"
}

# The server refuses to run as root: as root, run its tools as the postgres user.
as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start() {
  local bin
  bin=$(server_bin)
  if [ ! -f "$DATA/PG_VERSION" ]; then
    mkdir -p "$DATA"
    [ "$(id -u)" = 0 ] && chown postgres: "$DATA"
    chmod 700 "$DATA"
    as_owner "$bin/initdb" -D "$DATA" -U postgres -A trust --no-sync >&2
  fi
  if [ -f "$DATA/hpo-port" ]; then PORT=$(cat "$DATA/hpo-port"); fi
  if [ -z "$PORT" ]; then
    PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  fi
  if ! as_owner "$bin/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
    # Loopback only, socket inside the data folder; fsync off: a test database need not survive a power cut.
    as_owner "$bin/pg_ctl" -D "$DATA" -l "$DATA/server.log" -w -t 60 \
      -o "-p $PORT -k $DATA -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" start >&2
    echo "$PORT" >"$DATA/hpo-port"
  fi
  local psql=("$bin/psql" -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -qAt)
  if [ "$("${psql[@]}" -c "SELECT 1 FROM pg_roles WHERE rolname='$ROLE'")" != 1 ]; then
    "${psql[@]}" -c "CREATE ROLE $ROLE LOGIN PASSWORD '$PASSWORD'" >&2
  fi
  if [ "$("${psql[@]}" -c "SELECT 1 FROM pg_database WHERE datname='$DATABASE'")" != 1 ]; then
    "${psql[@]}" -c "CREATE DATABASE $DATABASE OWNER $ROLE" >&2
  fi
  echo "postgresql://$ROLE:$PASSWORD@127.0.0.1:$PORT/$DATABASE"
}

stop() {
  local bin
  bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$bin" ] && [ -f "$DATA/PG_VERSION" ]; then
    as_owner "$bin/pg_ctl" -D "$DATA" -m fast -w stop >&2 || true
  fi
  rm -rf "$DATA"
  log "stopped; data removed"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
