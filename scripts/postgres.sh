#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests of the relay's PostgreSQL store.
#
#   eval "$(scripts/postgres.sh start)"   # initdb into a new temporary folder, start on 127.0.0.1
#   scripts/postgres.sh stop "$HAPPY_TEST_POSTGRES_DIR"
#   scripts/postgres.sh pause DIR; scripts/postgres.sh resume DIR   # stop the server, start it again (same port)
#
# start prints two export lines: HAPPY_TEST_POSTGRES (a URL of the server's
# "postgres" database; the tests create a fresh database per test beside it)
# and HAPPY_TEST_POSTGRES_DIR (the cluster's folder, for stop). The server
# listens on 127.0.0.1 only, on a free port, with trust authentication for
# its superuser "happy" and its socket inside the folder. PostgreSQL refuses
# to run as root: run as root, the cluster belongs to, and runs as, the user
# "nobody". The cluster's default collation is ICU's en-US (where "a" sorts
# before "B"), not bytewise, so that the tests show the store's orders do
# not depend on the database's locale. Durability settings are off (tests need none); set
# POSTGRES_DURABLE=1 to keep PostgreSQL's defaults (benchmarks).
#
# The binaries are taken from $PGBIN, else the newest /usr/lib/postgresql/*/bin,
# else `pg_config --bindir`.
set -euo pipefail

find_bin() {
  if [ -n "${PGBIN:-}" ]; then
    echo "$PGBIN"
    return
  fi
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$d" ] && [ -x "$d/initdb" ]; then
    echo "$d"
    return
  fi
  if command -v pg_config >/dev/null; then
    pg_config --bindir
    return
  fi
  echo "postgres.sh: no PostgreSQL binaries found (install postgresql, or set PGBIN)" >&2
  exit 1
}

# as runs a command as the cluster's owner.
as() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u nobody -- "$@"
  else
    "$@"
  fi
}

start() {
  local bin dir port log ok=""
  bin=$(find_bin)
  dir=$(mktemp -d "${TMPDIR:-/tmp}/happy-pg.XXXXXX")
  if [ "$(id -u)" = 0 ]; then
    chown nobody "$dir"
  fi
  chmod 700 "$dir"
  log="$dir/server.log"
  (cd "$dir" && as "$bin/initdb" -D "$dir/data" -U happy --auth=trust -E UTF8 --locale=C.UTF-8 --locale-provider=icu --icu-locale=en-US >"$dir/initdb.log" 2>&1) || {
    cat "$dir/initdb.log" >&2
    exit 1
  }
  local opts="-c listen_addresses=127.0.0.1 -k $dir -c max_connections=300 -c shared_buffers=128MB"
  if [ -z "${POSTGRES_DURABLE:-}" ]; then
    opts="$opts -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
  fi
  # A port taken between the pick and the start makes pg_ctl fail: pick another.
  for _ in $(seq 1 20); do
    port=$((20000 + RANDOM % 40000))
    if (cd "$dir" && as "$bin/pg_ctl" -D "$dir/data" -l "$log" -w -t 60 -o "$opts -p $port" start >/dev/null 2>&1); then
      ok=1
      echo "$opts -p $port" >"$dir/options"
      break
    fi
  done
  if [ -z "$ok" ]; then
    echo "postgres.sh: the server did not start; its log:" >&2
    cat "$log" >&2 || true
    exit 1
  fi
  echo "export HAPPY_TEST_POSTGRES='postgres://happy@127.0.0.1:$port/postgres?sslmode=disable'"
  echo "export HAPPY_TEST_POSTGRES_DIR='$dir'"
}

stop() {
  local dir=${1:-${HAPPY_TEST_POSTGRES_DIR:-}}
  if [ -z "$dir" ] || [ ! -d "$dir/data" ]; then
    echo "postgres.sh: stop needs the cluster folder that start printed" >&2
    exit 1
  fi
  local bin
  bin=$(find_bin)
  (cd "$dir" && as "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null) || true
  rm -rf "$dir"
}

# pause stops the server of DIR (fast: open connections are ended) and
# keeps its folder; resume starts it again with the same options and port.
pause() {
  local dir=$1 bin
  bin=$(find_bin)
  (cd "$dir" && as "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null)
}

resume() {
  local dir=$1 bin
  bin=$(find_bin)
  (cd "$dir" && as "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -o "$(cat "$dir/options")" start >/dev/null)
}

case "${1:-start}" in
start) start ;;
stop) stop "${2:-}" ;;
pause) pause "${2:?pause needs DIR}" ;;
resume) resume "${2:?resume needs DIR}" ;;
*)
  echo "usage: $0 start | stop DIR | pause DIR | resume DIR" >&2
  exit 2
  ;;
esac
