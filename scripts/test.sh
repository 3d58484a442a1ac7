#!/usr/bin/env bash
# The whole test suite, against real PostgreSQL and Redis (see scripts/with_services.py), plus lint.
# Extra arguments go to pytest, e.g. scripts/test.sh -k report -x
source "$(dirname "$0")/_venv.sh"
ensure_venv test
ensure_chromium
echo "== lint (ruff)"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== tests"
exec .venv/bin/python scripts/with_services.py -- .venv/bin/python -m pytest "$@"
