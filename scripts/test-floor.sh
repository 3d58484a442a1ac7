#!/usr/bin/env bash
# The README's floor: Python 3.11, where the pins fall back to Django 5.2 LTS (scripts/test.sh runs the newest Python
# found). A venv of its own, .venv-floor, then:
#   1. the pure cores' tests without Django (topology, importers, scheduler core, sim, telemetry, job environment);
#   2. on Django 5.2: the system checks, no model change without its migration, and the tests of the tenant API,
#      the demo and the README's commands, on SQLite (the services' paths are scripts/test.sh's).
# FLOOR_PYTHON names the interpreter (default python3.11). Arguments replace step 2's tests, e.g. the whole suite:
#   scripts/test-floor.sh tests
source "$(dirname "$0")/_venv.sh"
py="${FLOOR_PYTHON:-python3.11}"
if ! command -v "$py" >/dev/null 2>&1; then
    echo "the floor needs $py (Debian 12: apt-get install python3 python3-venv; or FLOOR_PYTHON=...)" >&2
    exit 1
fi
ensure_venv test .venv-floor "$py"
floor=.venv-floor/bin/python
echo "== floor: $("$floor" --version), Django $("$floor" -c 'import django; print(django.get_version())')"

# Nothing of the caller's configuration: SQLite in memory for the tests, a scratch file for the checks.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
unset DATABASE_URL REDIS_URL DEBUG SECRET_KEY DJANGO_SETTINGS_MODULE
export PYTHONDONTWRITEBYTECODE=1
manage() { DJANGO_SETTINGS_MODULE=clusterctl.test_settings DATABASE_URL="sqlite:///$scratch/c.sqlite3" "$floor" manage.py "$@"; }
status=0

echo "== floor: pure cores (no Django)"
"$floor" -m pytest -q -p no:django tests/fabric/topology tests/fabric/importers tests/scheduler/core tests/scheduler/sim tests/fabric/telemetry \
    tests/scheduler/launch/test_env.py || status=1

echo "== floor: Django checks and migrations"
manage check || status=1
manage makemigrations --check --dry-run || status=1

echo "== floor: tests on Django"
if [ "$#" -eq 0 ]; then
    set -- tests/scheduler/api tests/clusterctl/test_demo.py tests/test_readme.py
fi
"$floor" -m pytest -q "$@" || status=1
exit "$status"
