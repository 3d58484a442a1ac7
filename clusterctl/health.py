"""/healthz: is the database reachable, is the broker reachable. 200 when both are, 503 otherwise."""

from __future__ import annotations

import time

from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET


def _check_database() -> str | None:
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT 1")
            cur.fetchone()
    except Exception as exc:  # any driver error means "not reachable"
        return f"{type(exc).__name__}: {exc}"
    return None


def _check_broker() -> str | None:
    from clusterctl.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


@never_cache
@require_GET
def healthz(request):
    started = time.monotonic()
    checks = {"database": _check_database(), "broker": _check_broker()}
    ok = all(v is None for v in checks.values())
    body = {
        "status": "ok" if ok else "unavailable",
        "mode": "embedded" if settings.EMBEDDED else "production",
        "checks": {k: ("ok" if v is None else v) for k, v in checks.items()},
        "elapsed_ms": round((time.monotonic() - started) * 1000, 1),
    }
    return JsonResponse(body, status=200 if ok else 503)
