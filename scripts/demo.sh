#!/usr/bin/env bash
# The embedded demo: one process, no services. Migrates, builds the demo clusters, serves on 127.0.0.1:8000.
# Extra arguments go to `manage.py demo`, e.g. scripts/demo.sh --nodes 256 --port 8080
source "$(dirname "$0")/_venv.sh"
ensure_venv test
export DEBUG="${DEBUG:-1}"
exec .venv/bin/python manage.py demo "$@"
