"""Production settings pass Django's deployment checklist, and refuse to start without a SECRET_KEY.

Each case runs in a subprocess with a production-like environment, so these tests need no database and do not
depend on the settings (if any) loaded by the test run itself. A .env file in the checkout, which settings.py would
otherwise read, is ignored: these tests are about the defaults plus the variables set here.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ROOT / "clusterctl" / "settings.py"

# manage.py, minus the developer's .env: what a container with only its environment runs.
RUN_MANAGE_PY = (
    "import os, sys, environ; "
    "environ.Env.read_env = classmethod(lambda cls, *args, **kwargs: None); "
    "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'clusterctl.settings'); "
    "from django.core.management import execute_from_command_line; "
    "execute_from_command_line(['manage.py', *sys.argv[1:]])"
)


def _settings_variables() -> set[str]:
    return set(re.findall(r"""\benv(?:\.\w+)?\(\s*["']([A-Z][A-Z0-9_]*)["']""", SETTINGS.read_text()))


def _production_env(tmp_path: Path, **overrides: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _settings_variables()}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "clusterctl.settings",
            "DEBUG": "0",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "ALLOWED_HOSTS": "clusterctl.example.org",
            "CSRF_TRUSTED_ORIGINS": "https://clusterctl.example.org",
            "DATABASE_URL": f"sqlite:///{tmp_path / 'check.sqlite3'}",
            # Production mode (Redis cache and channel layer); `check` connects to neither.
            "REDIS_URL": "redis://127.0.0.1:6379/0",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    env.update(overrides)
    return env


def _manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", RUN_MANAGE_PY, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_check_deploy_passes_with_production_settings(tmp_path):
    result = _manage(_production_env(tmp_path), "check", "--deploy", "--fail-level", "WARNING")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "System check identified no issues" in result.stdout, output
    assert "WARNINGS:" not in output and "ERRORS:" not in output, output


def test_check_deploy_passes_behind_a_tls_proxy(tmp_path):
    env = _production_env(tmp_path, BEHIND_TLS_PROXY="1")
    result = _manage(env, "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 0, result.stdout + result.stderr


def test_settings_refuse_to_start_without_secret_key(tmp_path):
    # Set but empty, as in an unedited .env.example: must fail the same way as unset.
    for secret in ("", None):
        env = _production_env(tmp_path)
        if secret is None:
            del env["SECRET_KEY"]
        else:
            env["SECRET_KEY"] = secret
        result = _manage(env, "check")
        assert result.returncode != 0, result.stdout
        assert "ImproperlyConfigured" in result.stderr, result.stderr
        assert "SECRET_KEY" in result.stderr.strip().splitlines()[-1], result.stderr


def test_debug_mode_starts_without_secret_key(tmp_path):
    """The development fallback exists only with DEBUG on (the embedded demo needs no configuration)."""
    env = _production_env(tmp_path, DEBUG="1")
    del env["SECRET_KEY"]
    result = _manage(env, "shell", "-c", "from django.conf import settings; print(bool(settings.SECRET_KEY))")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "True", result.stdout


def test_production_fans_frames_out_through_redis_pub_sub(tmp_path):
    # Published once per group and handed to each web process's sockets in memory: the list-based layer's copy per
    # socket, popped one Redis round trip at a time, was most of the web processes' time at 1,000 sockets.
    code = (
        "import environ; environ.Env.read_env = classmethod(lambda cls, *args, **kwargs: None); "
        "import django; django.setup(); from django.conf import settings; "
        "layer = settings.CHANNEL_LAYERS['default']; host = layer['CONFIG']['hosts'][0]; "
        "print(layer['BACKEND'], host['address'], host['socket_connect_timeout'] <= 5)"
    )
    env = _production_env(tmp_path, REDIS_URL="redis://127.0.0.1:6379/0")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["channels_redis.pubsub.RedisPubSubChannelLayer", "redis://127.0.0.1:6379/0", "True"]


def test_settings_refuse_a_negative_limit_of_starts_per_round(tmp_path):
    result = _manage(_production_env(tmp_path, SCHEDULER_MAX_PLACEMENTS_PER_ROUND="-1"), "check")
    assert result.returncode != 0, result.stdout
    assert result.stderr.strip().splitlines()[-1] == (
        "django.core.exceptions.ImproperlyConfigured: SCHEDULER_MAX_PLACEMENTS_PER_ROUND must be 0 (no limit) or more, "
        "not -1"
    ), result.stderr


def test_the_limit_of_starts_per_round_reaches_the_engine(tmp_path):
    env = _production_env(tmp_path, DEBUG="1", SCHEDULER_MAX_PLACEMENTS_PER_ROUND="0")
    code = "from scheduler.snapshot_from_db import _config; from django.conf import settings; " + (
        "print(_config(settings.SCHEDULER_MAX_PLACEMENTS_PER_ROUND).max_placements_per_round)"
    )
    result = _manage(env, "shell", "-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "0", result.stdout
