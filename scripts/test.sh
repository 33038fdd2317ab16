#!/usr/bin/env bash
# THE test command of querator: `bash scripts/test.sh [pytest args...]`.
#
# 1. creates (or reuses) the virtualenv .venv and installs querator[dev] into it;
#    installs Debian's chromium (apt-get) when /usr/bin/chromium is missing;
# 2. finds PostgreSQL (scripts/find_postgres.sh: $QUERATOR_TEST_DSN, the local
#    server at 127.0.0.1:5432, the local cluster started, or a throwaway cluster)
#    and exports QUERATOR_TEST_DSN — with no PostgreSQL it fails, it never skips;
# 3. runs ruff check, ruff format --check, mypy --strict (querator, tests, examples),
#    the TypeScript client's tests (clients/typescript: npm ci, tsc, node --test
#    against a real querator serve; skipped, loudly, without node) and pytest -n 2.
# Exits non-zero when any step fails, and when pytest collected no tests.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
ROOT="$(pwd)"

loud() {
    echo >&2
    echo "========================================================================" >&2
    echo "scripts/test.sh: $*" >&2
    echo "========================================================================" >&2
}

pick_python() {
    local candidate
    for candidate in "${PYTHON:-}" python3.11 python3 python3.12 python3.13 python; do
        [ -n "$candidate" ] || continue
        command -v "$candidate" >/dev/null 2>&1 || continue
        if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

# -- 1. virtualenv -------------------------------------------------------------
if ! [ -x .venv/bin/python ] || ! .venv/bin/python -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    PY="$(pick_python)" || { loud "no Python >= 3.11 found (set PYTHON=/path/to/python3.11)"; exit 2; }
    echo "scripts/test.sh: creating .venv with $PY" >&2
    "$PY" -m venv --clear .venv || { loud "could not create .venv"; exit 2; }
fi
# shellcheck disable=SC1091
. .venv/bin/activate
export PIP_DISABLE_PIP_VERSION_CHECK=1
if ! python -m pip install -q -e '.[dev]'; then
    loud "pip install -e '.[dev]' failed"
    exit 2
fi

# -- 1b. Chromium for the dashboard's browser tests (Debian's package, never a download)
if ! [ -x /usr/bin/chromium ]; then
    echo "scripts/test.sh: installing chromium with apt-get (tests/dashboard drive it)" >&2
    if ! { apt-get install -y -q chromium >/dev/null 2>&1 \
            || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1; }; }; then
        loud "NO CHROMIUM: /usr/bin/chromium is missing and \`apt-get install -y chromium\` failed.
The dashboard's browser tests (tests/dashboard/) need Debian's chromium package."
        exit 2
    fi
fi

# -- 2. PostgreSQL ---------------------------------------------------------------
# shellcheck source=scripts/find_postgres.sh
. "$ROOT/scripts/find_postgres.sh"
if ! find_postgres; then
    loud "NO POSTGRESQL: the PostgreSQL conformance tests cannot run, so the suite fails.
Set QUERATOR_TEST_DSN=postgresql://user@host:port/db to a server that answers,
or start the local one (pg_ctlcluster --skip-systemctl-redirect \$(ls /etc/postgresql) main start),
or install PostgreSQL (apt-get install postgresql) so a throwaway cluster can be made."
    exit 3
fi
trap stop_throwaway_postgres EXIT
export QUERATOR_TEST_DSN
echo "scripts/test.sh: QUERATOR_TEST_DSN=$QUERATOR_TEST_DSN" >&2

# -- 2b. Citus -------------------------------------------------------------------
# tests/citus start a throwaway Citus cluster; the extension is built into the
# local PostgreSQL once by ../shared/citus/build.sh (about a minute on 2 cores the
# first time, 6 minutes on a busy machine; a no-op check of ~0.1 s afterwards).
citus_build=""
for candidate in "${QUERATOR_CITUS_BUILD:-}" "$ROOT/../shared/citus/build.sh" "$ROOT/../../shared/citus/build.sh"; do
    if [ -n "$candidate" ] && [ -f "$candidate" ]; then
        citus_build="$candidate"
        break
    fi
done
pkglibdir="$(pg_config --pkglibdir 2>/dev/null || /usr/lib/postgresql/15/bin/pg_config --pkglibdir 2>/dev/null || true)"
if [ -n "$citus_build" ] && ! [ -f "$pkglibdir/citus.so" ]; then
    echo "scripts/test.sh: building Citus into PostgreSQL ($citus_build)" >&2
    bash "$citus_build" >&2 || loud "building Citus failed: the tests in tests/citus will fail"
fi

# -- 3. checks -------------------------------------------------------------------
failed=()
step() {
    local name="$1"
    shift
    echo "---- $name" >&2
    if ! "$@"; then
        failed+=("$name")
    fi
}

step "ruff check" ruff check querator tests examples
step "ruff format --check" ruff format --check querator tests examples
step "mypy --strict querator tests examples" mypy --strict querator tests examples

typescript_client() {
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        loud "SKIPPED the TypeScript client's tests: node/npm not found (install Node >= 18)"
        return 0
    fi
    (
        cd clients/typescript || exit 1
        npm ci --no-audit --no-fund --loglevel=error && QUERATOR_PYTHON="$ROOT/.venv/bin/python" npm test
    )
}
step "typescript client (clients/typescript)" typescript_client

echo "---- pytest -n 2 --durations=30 $*" >&2
pytest -n 2 --durations=30 "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
    failed+=("pytest (no tests were collected)")
elif [ "$rc" -ne 0 ]; then
    failed+=("pytest (exit $rc)")
fi

if [ "${#failed[@]}" -gt 0 ]; then
    loud "FAILED: ${failed[*]}"
    exit 1
fi
exit 0
