# syntax=docker/dockerfile:1
#
# One image for every clusterctl process. The command picks the role:
#   web     uvicorn clusterctl.asgi:application --host 0.0.0.0 --port 8000 ...   (the default CMD)
#   worker  celery -A clusterctl worker -l INFO
#   beat    celery -A clusterctl beat -l INFO --schedule /tmp/celerybeat-schedule
#   admin   python manage.py migrate | createsuperuser | ...
# docker-compose.yml runs them all; docs/deployment.md explains the configuration (environment variables only).
#
#   docker build -t clusterctl:latest .

FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PYTHONPATH=/app \
    DJANGO_SETTINGS_MODULE=clusterctl.settings

WORKDIR /app

RUN groupadd --system --gid 10001 clusterctl \
    && useradd --system --uid 10001 --gid clusterctl --home-dir /home/clusterctl --create-home \
       --shell /usr/sbin/nologin clusterctl

# Dependencies in their own layer, rebuilt only when pyproject.toml changes: the pinned list of [project].dependencies.
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
       > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

# The project itself. PYTHONPATH=/app makes the processes run this checkout (settings find templates/ and static/
# next to it through BASE_DIR), and `pip install .` checks that the pinned dependencies are all satisfied.
COPY . .
RUN pip install . && rm -rf build ./*.egg-info

# Static files are collected into the image (served by WhiteNoise). The SECRET_KEY here exists for this one
# command only: it is not an ENV, so it is not in the image, and the settings refuse to start without a real one.
RUN DEBUG=0 SECRET_KEY=build-only-collectstatic-key-never-used-at-runtime DATABASE_URL=sqlite:////tmp/build.sqlite3 \
       python manage.py collectstatic --noinput \
    && rm -f /tmp/build.sqlite3 \
    && mkdir -p /app/var \
    && chown clusterctl:clusterctl /app/var

USER clusterctl

EXPOSE 8000

# /healthz answers 200 when the database and the broker are reachable, 503 otherwise (urlopen raises on both 503 and
# connection errors). The Host header is the first ALLOWED_HOSTS entry, or Django would answer 400 DisallowedHost.
# Only meaningful for the web role: docker-compose.yml gives worker and beat their own checks.
HEALTHCHECK --interval=30s --timeout=10s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request as u; h = os.environ.get('ALLOWED_HOSTS', '').split(',')[0].strip().lstrip('.').replace('*', '') or 'localhost'; u.urlopen(u.Request('http://127.0.0.1:8000/healthz', headers={'Host': h}), timeout=8)"]

# uvicorn, not daphne: it hands the app the headers before the body, so clusterctl/limits.py refuses an oversized body
# (413) before reading it; daphne reads every body whole first. Proxy headers are Django's business (BEHIND_TLS_PROXY,
# TRUSTED_PROXIES), and the ASGI app has no lifespan handler.
CMD ["uvicorn", "clusterctl.asgi:application", "--host", "0.0.0.0", "--port", "8000", "--workers", "2", "--lifespan", "off", "--no-proxy-headers", "--ws-per-message-deflate", "false"]
