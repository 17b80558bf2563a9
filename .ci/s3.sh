#!/usr/bin/env bash
# A throwaway S3-compatible server on loopback for the s3 test suite: moto's server mode (the `moto[server]` package
# of the dev extra; MinIO is not installable here, and Ceph's radosgw needs a whole Ceph cluster).
#
#   export HPO_TEST_S3_ENDPOINT=$(bash .ci/s3.sh start)   # prints only the endpoint URL on stdout
#   python -m pytest -m s3
#   bash .ci/s3.sh stop                                   # stops the server; its objects live in memory and go too
#
# Its pid, port and log in $HPO_S3_DIR (default /tmp/hpo-s3); port $HPO_S3_PORT, default a free one. Clients reach it
# with AWS_ENDPOINT_URL=<the URL> and any key pair (moto checks none).
set -euo pipefail

DIR=${HPO_S3_DIR:-/tmp/hpo-s3}
PORT=${HPO_S3_PORT:-}

log() { echo "s3.sh: $*" >&2; }

running() { [ -f "$DIR/pid" ] && kill -0 "$(cat "$DIR/pid")" 2>/dev/null; }

answers() { python3 -c "import urllib.request, sys; urllib.request.urlopen(sys.argv[1], timeout=2)" "$1" 2>/dev/null; }

start() {
  local server
  server=$(command -v moto_server || true)
  if [ -z "$server" ]; then
    log "moto_server is not on PATH: install the dev extra (pip install -c constraints.txt -e '.[dev]')"
    exit 1
  fi
  mkdir -p "$DIR"
  if running; then
    PORT=$(cat "$DIR/port")
  else
    if [ -z "$PORT" ]; then
      PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    fi
    # setsid: its own session, so a Ctrl-C of the command that started it does not stop it mid-suite.
    setsid "$server" -H 127.0.0.1 -p "$PORT" >"$DIR/server.log" 2>&1 </dev/null &
    echo $! >"$DIR/pid"
    echo "$PORT" >"$DIR/port"
  fi
  local url="http://127.0.0.1:$PORT"
  for _ in $(seq 1 100); do
    if answers "$url"; then
      log "moto S3 server on $url (pid $(cat "$DIR/pid")); log in $DIR/server.log"
      echo "$url"
      return
    fi
    running || { log "the server exited; see $DIR/server.log"; exit 1; }
    sleep 0.2
  done
  log "no answer from $url after 20 s; see $DIR/server.log"
  exit 1
}

stop() {
  if running; then
    local pid
    pid=$(cat "$DIR/pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -rf "$DIR"
  log "stopped"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
