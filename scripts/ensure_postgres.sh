#!/usr/bin/env bash
# Make sure a PostgreSQL server answers on 127.0.0.1:5432 and the test database exists (issue 10).
# Starts the local cluster when it is down; installs PostgreSQL when it is missing and we are root.
# Fails loudly otherwise: the PostgreSQL tests must run, never be skipped.
set -euo pipefail

HOST=127.0.0.1
PORT=5432
DB_USER="${PGUSER:-postgres}"
TEST_DB="${SWITCHBOARD_TEST_DB:-test}"

fail() {
  echo "ensure_postgres: $*" >&2
  exit 1
}

answers() {
  pg_isready -q -h "$HOST" -p "$PORT" -t 2
}

if ! command -v pg_ctlcluster >/dev/null 2>&1 || ! compgen -G "/etc/postgresql/*/main" >/dev/null; then
  if [ "$(id -u)" -ne 0 ]; then
    fail "PostgreSQL is not installed and we are not root: install it (apt-get install -y postgresql) and re-run"
  fi
  echo "ensure_postgres: installing PostgreSQL" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || fail "apt-get update failed"
  apt-get install -y -qq postgresql >/dev/null || fail "apt-get install -y postgresql failed"
fi

if ! answers; then
  version="$(ls /etc/postgresql | sort -V | tail -n 1)"
  [ -n "$version" ] || fail "no cluster under /etc/postgresql"
  echo "ensure_postgres: starting PostgreSQL $version/main" >&2
  # A non-zero exit may just mean another run started it first: the readiness wait decides.
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || echo "ensure_postgres: pg_ctlcluster start failed" >&2
  for _ in $(seq 1 30); do
    answers && break
    sleep 0.5
  done
  answers || fail "PostgreSQL $version/main does not answer on $HOST:$PORT (check its log under /var/log/postgresql)"
fi

psql_q() {
  psql -h "$HOST" -p "$PORT" -U "$DB_USER" -d postgres -v ON_ERROR_STOP=1 -qtAX "$@"
}

exists="$(psql_q -c "SELECT 1 FROM pg_database WHERE datname = '$TEST_DB'")" \
  || fail "cannot log in to $HOST:$PORT as $DB_USER (the tests expect trust auth for $DB_USER on 127.0.0.1)"
if [ "$exists" != "1" ]; then
  echo "ensure_postgres: creating database $TEST_DB" >&2
  # A concurrent run may have created it meanwhile: only a still-missing database is an error.
  psql_q -c "CREATE DATABASE \"$TEST_DB\"" 2>/dev/null \
    || [ "$(psql_q -c "SELECT 1 FROM pg_database WHERE datname = '$TEST_DB'")" = "1" ] \
    || fail "cannot create database $TEST_DB"
fi
# Every test makes and drops a schema, which leaves dead system-catalog rows; on a server with autovacuum
# off (a CI image may switch it off) they pile up from run to run and slow every later one, so they go
# here, as autovacuum would take them (a tenth of a second: the catalogs only, whatever tables a killed
# run left behind; the same list as bench/bench_store.py's).
if [ "$(psql_q -c "SHOW autovacuum")" = "off" ]; then
  catalogs="pg_attribute, pg_depend, pg_class, pg_index, pg_type, pg_constraint, pg_attrdef"
  psql -h "$HOST" -p "$PORT" -U "$DB_USER" -d "$TEST_DB" -v ON_ERROR_STOP=1 -qtAX -c "VACUUM $catalogs" \
    || echo "ensure_postgres: VACUUM of $TEST_DB's catalogs failed; the tests still run" >&2
fi
echo "ensure_postgres: PostgreSQL answers on $HOST:$PORT, database $TEST_DB ready"
