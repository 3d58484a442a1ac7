#!/usr/bin/env bash
# The embedded demo: one process, no services. Migrates, builds the demo clusters, serves on 127.0.0.1:8000, and
# keeps the cluster alive: a Celery worker and beat in the same process (in-memory broker) poll the twin (the
# simulated cluster) every 5 s and run scheduling rounds, so counters move and faults come and go.
# Extra arguments go to `manage.py demo`, e.g. scripts/demo.sh --nodes 256 --port 8080 --poll-interval 2;
# --no-serve sets up and exits, --static serves without the worker and beat.
source "$(dirname "$0")/_venv.sh"
ensure_venv ""  # what the app runs; the test suite's extras (scripts/test.sh) are not needed to serve
# A development .env (DEBUG=1, a generated SECRET_KEY) unless there is one: the README's manage.py lines read it.
.venv/bin/python scripts/dev_env.py
export DEBUG="${DEBUG:-1}"
exec .venv/bin/python manage.py demo "$@"
