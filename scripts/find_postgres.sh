#!/usr/bin/env bash
# Find (or start) a PostgreSQL server for querator's tests.
#
# Source this file and call `find_postgres`: on success it sets and exports
# QUERATOR_TEST_DSN and returns 0; when no server can be had it prints why and
# returns 1. Run directly, it prints the DSN on stdout (messages go to stderr).
#
# Order of attempts:
#   1. $QUERATOR_TEST_DSN, if set (it must answer; it is never replaced).
#   2. postgresql://root@127.0.0.1:5432/test, if it answers.
#   3. The machine's own cluster, started with pg_ctlcluster, then step 2 again.
#   4. A throwaway cluster: initdb + pg_ctl in a temporary directory on a free
#      port, owned by a non-root user when we are root (initdb refuses root).
#      `stop_throwaway_postgres` stops it and removes its directory;
#      QUERATOR_PG_THROWAWAY names that directory while it runs.

_pg_log() { echo "find_postgres: $*" >&2; }

# pg_answers DSN: true when a client can connect and run a query.
pg_answers() {
    local dsn="$1"
    if command -v psql >/dev/null 2>&1; then
        PGCONNECT_TIMEOUT=3 psql "$dsn" -XAtqc 'select 1' >/dev/null 2>&1 && return 0
    fi
    local py
    for py in "${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python}" python3 python; do
        [ -n "$py" ] && command -v "$py" >/dev/null 2>&1 || continue
        "$py" - "$dsn" >/dev/null 2>&1 <<'EOF' && return 0
import sys
import psycopg
with psycopg.connect(sys.argv[1], connect_timeout=3) as conn:
    conn.execute("select 1")
EOF
    done
    return 1
}

# _pg_bindir: the directory holding initdb and pg_ctl (newest version first).
_pg_bindir() {
    local dir
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then
            echo "$dir"
            return 0
        fi
    done
    if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
        dirname "$(command -v initdb)"
        return 0
    fi
    return 1
}

_pg_free_port() {
    local py
    for py in "${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python}" python3 python; do
        [ -n "$py" ] && command -v "$py" >/dev/null 2>&1 || continue
        "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()' && return 0
    done
    echo 55432
}

# _pg_as_owner USER CMD...: run CMD as USER (or as ourselves when USER is empty).
_pg_as_owner() {
    local owner="$1"
    shift
    if [ -z "$owner" ]; then
        "$@"
    elif command -v runuser >/dev/null 2>&1; then
        runuser -u "$owner" -- "$@"
    else
        su -s /bin/sh "$owner" -c "$(printf '%q ' "$@")"
    fi
}

_pg_start_local_cluster() {
    command -v pg_ctlcluster >/dev/null 2>&1 || return 1
    [ -d /etc/postgresql ] || return 1
    local version
    for version in $(ls /etc/postgresql 2>/dev/null); do
        _pg_log "starting the local cluster $version/main with pg_ctlcluster"
        pg_ctlcluster --skip-systemctl-redirect "$version" main start >&2 2>&1 || true
    done
    local _
    for _ in $(seq 1 20); do
        pg_answers "$1" && return 0
        sleep 0.5
    done
    return 1
}

_pg_start_throwaway() {
    local bindir owner="" dir port
    bindir="$(_pg_bindir)" || { _pg_log "no initdb/pg_ctl found"; return 1; }
    if [ "$(id -u)" = 0 ]; then
        if id postgres >/dev/null 2>&1; then owner=postgres; else owner=nobody; fi
    fi
    dir="$(mktemp -d "${TMPDIR:-/tmp}/querator-pg.XXXXXX")" || return 1
    chmod 755 "$dir"
    [ -n "$owner" ] && chown "$owner" "$dir"
    port="$(_pg_free_port)"
    _pg_log "starting a throwaway cluster in $dir on port $port${owner:+ (as $owner)}"
    if ! _pg_as_owner "$owner" "$bindir/initdb" -D "$dir/data" -U root -A trust -E UTF8 \
        >"$dir/initdb.log" 2>&1; then
        _pg_log "initdb failed:"; cat "$dir/initdb.log" >&2
        rm -rf "$dir"
        return 1
    fi
    if ! _pg_as_owner "$owner" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" \
        start >&2; then
        _pg_log "pg_ctl start failed:"; cat "$dir/server.log" >&2
        rm -rf "$dir"
        return 1
    fi
    export QUERATOR_PG_THROWAWAY="$dir"
    export QUERATOR_PG_THROWAWAY_OWNER="$owner"
    export QUERATOR_PG_THROWAWAY_BINDIR="$bindir"
    local admin="postgresql://root@127.0.0.1:$port/postgres"
    if command -v psql >/dev/null 2>&1; then
        psql "$admin" -XAtqc 'create database test' >/dev/null 2>&1 || true
    else
        "${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/}python" - "$admin" >/dev/null 2>&1 <<'EOF' || true
import sys
import psycopg
with psycopg.connect(sys.argv[1], autocommit=True) as conn:
    conn.execute("create database test")
EOF
    fi
    QUERATOR_TEST_DSN="postgresql://root@127.0.0.1:$port/test"
    pg_answers "$QUERATOR_TEST_DSN" || QUERATOR_TEST_DSN="$admin"
    pg_answers "$QUERATOR_TEST_DSN"
}

stop_throwaway_postgres() {
    local dir="${QUERATOR_PG_THROWAWAY:-}"
    [ -n "$dir" ] && [ -d "$dir" ] || return 0
    _pg_as_owner "${QUERATOR_PG_THROWAWAY_OWNER:-}" "$QUERATOR_PG_THROWAWAY_BINDIR/pg_ctl" \
        -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    unset QUERATOR_PG_THROWAWAY
}

find_postgres() {
    if [ -n "${QUERATOR_TEST_DSN:-}" ]; then
        if pg_answers "$QUERATOR_TEST_DSN"; then
            export QUERATOR_TEST_DSN
            _pg_log "using QUERATOR_TEST_DSN"
            return 0
        fi
        _pg_log "QUERATOR_TEST_DSN is set but does not answer: $QUERATOR_TEST_DSN"
        return 1
    fi
    local local_dsn="postgresql://root@127.0.0.1:5432/test"
    if pg_answers "$local_dsn" || _pg_start_local_cluster "$local_dsn"; then
        export QUERATOR_TEST_DSN="$local_dsn"
        _pg_log "using $local_dsn"
        return 0
    fi
    if _pg_start_throwaway; then
        export QUERATOR_TEST_DSN
        _pg_log "using throwaway cluster at $QUERATOR_TEST_DSN"
        return 0
    fi
    return 1
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    if find_postgres; then
        echo "$QUERATOR_TEST_DSN"
        if [ -n "${QUERATOR_PG_THROWAWAY:-}" ]; then
            _pg_log "the throwaway cluster keeps running; stop it with:"
            _pg_log "  ${QUERATOR_PG_THROWAWAY_OWNER:+runuser -u $QUERATOR_PG_THROWAWAY_OWNER -- }$QUERATOR_PG_THROWAWAY_BINDIR/pg_ctl -D $QUERATOR_PG_THROWAWAY/data stop"
        fi
        exit 0
    fi
    _pg_log "no PostgreSQL server could be found or started"
    exit 1
fi
