"""Settings for the test suite: the real settings, read from the environment like production,
with the few defaults a test run needs (a throwaway key, plain HTTP test client, fast hashing)."""

import os

# No .env: what the suite tests must not depend on the checkout's (scripts/demo.sh writes one with DEBUG=1).
os.environ.setdefault("CLUSTERCTL_ENV_FILE", "")
os.environ.setdefault("SECRET_KEY", "test-only-key-0123456789-abcdefghijklmnopqrstuvwxyz-not-secret")
os.environ.setdefault("SECURE_SSL_REDIRECT", "0")
os.environ.setdefault("ALLOWED_HOSTS", "testserver,localhost,127.0.0.1")
# Every test client is 127.0.0.1 and user ids repeat across tests: the suite's requests must not add up to the
# production rates. The tests of the throttles set their own (tests/security/).
os.environ.setdefault("API_THROTTLE_ANON", "1000000/min")
os.environ.setdefault("API_THROTTLE_USER", "1000000/min")
os.environ.setdefault("LOGIN_THROTTLE", "1000000/min")

from clusterctl.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Connections opened by async consumers' worker threads must not outlive a test (test DB teardown).
DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405
# Serve static files from the source folders: tests do not run collectstatic.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
STORAGES = {**STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}  # noqa: F405
STATIC_ROOT = None
# Rounds requested by a commit run inline, so transactional tests see them (no worker in the test run);
# the end-to-end test starts a real worker with CELERY_TASK_ALWAYS_EAGER=0.
CELERY_TASK_ALWAYS_EAGER = os.environ.get("CELERY_TASK_ALWAYS_EAGER", "1") == "1"
# Jobs are played by the twin unless a test says otherwise
# (tests/scheduler/launch/test_lifecycle_e2e.py runs real agents).
LAUNCHER = os.environ.get("LAUNCHER", "twin")
# Collectors that exist only for tests.
COLLECTORS = {
    **COLLECTORS,  # noqa: F405
    "static": "tests.fabric.static_collector.StaticCollector",
    "xid": "tests.fabric.static_collector.XidCollector",
}
# One test database per run, so two runs on one server (a developer and CI, or parallel sessions) never collide: named
# after the run's database (scripts/with_services.py gives each run one of its own, and drops test_<it>_* after it)
# and this process. SQLite tests use an in-memory database (a NAME there would be a file in the working directory).
if DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3":  # noqa: F405
    DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}_{os.getpid()}"[:63]}  # noqa: F405
# Cache keys of one run never meet another run's (ids restart with each test database).
CACHES["default"]["KEY_PREFIX"] = os.environ.get("TEST_CACHE_PREFIX", f"test{os.getpid()}")  # noqa: F405
