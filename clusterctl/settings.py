"""Settings, all from the environment (django-environ); see README "Configuration".

Nothing set: embedded mode (SQLite, in-memory channel layer, in-process Celery on an
in-memory broker). DATABASE_URL / REDIS_URL switch to PostgreSQL and Redis.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured
from redis import backoff as redis_backoff
from redis import retry as redis_retry

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
# A .env beside manage.py (scripts/demo.sh writes one for development); variables already set win. CLUSTERCTL_ENV_FILE
# names another file, or none when empty (the test suite: a developer's .env must not change what it tests).
ENV_FILE = os.environ.get("CLUSTERCTL_ENV_FILE", str(BASE_DIR / ".env"))
if ENV_FILE and Path(ENV_FILE).is_file():
    environ.Env.read_env(ENV_FILE)

DEBUG = env.bool("DEBUG", default=False)
SECRET_KEY = env.str("SECRET_KEY", default="")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off (set DEBUG=1 for local development)")
    SECRET_KEY = "insecure-development-key-only-for-DEBUG-mode-never-deploy-this"

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "knox",
    "axes",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "csp",
    "clusterctl",
    "fabric",
    "scheduler",
    "dashboard",
]

MIDDLEWARE = [
    # Request metrics for /metrics (django-prometheus): first and last, to time the stack and the view.
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Content-Security-Policy on every page (after WhiteNoise: static files need none); see CONTENT_SECURITY_POLICY.
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Sign-ins: 429 while the address is over the failed-login rate (clusterctl/throttles.py); axes turns a locked-out
    # username into its 429 answer (after every middleware that may authenticate, as its docs require).
    "clusterctl.throttles.LoginRateLimitMiddleware",
    "axes.middleware.AxesMiddleware",
    # A view that meets the database, Redis or the broker out of reach answers 503 with Retry-After, not 500 (the API's
    # views: REST_FRAMEWORK's EXCEPTION_HANDLER; clusterctl/errors.py).
    "clusterctl.errors.OutageMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

ROOT_URLCONF = "clusterctl.urls"
WSGI_APPLICATION = "clusterctl.wsgi.application"
ASGI_APPLICATION = "clusterctl.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

#
# Data stores
#
DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'var' / 'clusterctl.sqlite3'}")}
# ASGI serves requests from many threads: Django's advice is no persistent connections there.
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DB_CONN_MAX_AGE", default=0)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    (BASE_DIR / "var").mkdir(exist_ok=True)
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {}).update({"timeout": 20, "transaction_mode": "IMMEDIATE"})
    # The live jobs' index carries their version for PostgreSQL's index-only scan (scheduler.models.jobs); SQLite
    # keeps the index without it, which is all the embedded demo needs.
    SILENCED_SYSTEM_CHECKS = ["models.W040"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env.str("REDIS_URL", default="")
EMBEDDED = not REDIS_URL

# Seconds a Redis command or connection may take before it counts as an outage (cache and broker): a Redis that hangs
# instead of refusing must not hold a request for long (docs/deployment.md "When Redis or PostgreSQL is down").
REDIS_SOCKET_TIMEOUT_S = env.float("REDIS_SOCKET_TIMEOUT_S", default=2.0)
if REDIS_SOCKET_TIMEOUT_S <= 1:
    raise ImproperlyConfigured("REDIS_SOCKET_TIMEOUT_S must exceed 1 s: a worker's BRPOP on the broker waits 1 s")

if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": {"socket_connect_timeout": REDIS_SOCKET_TIMEOUT_S, "socket_timeout": REDIS_SOCKET_TIMEOUT_S},
        }
    }
    # Redis pub/sub (docs/deployment.md, "Live views"): a group's message is published once, and each web process
    # with sockets in the group receives it once and hands it to them in memory. The list-based layer
    # (channels_redis.core) stored a copy per socket and each web process popped them one Redis round trip at a time:
    # at 1,000 sockets that fan-out was the largest part of the web processes' time (bench_push_load: p99 254-318 ms
    # against 169-176 ms here). A socket that stops reading is dropped by its consumer (dashboard.consumers,
    # SLOW_CLIENT_S), not buffered; one that misses frames (Redis restarting) sees the seq gap and resyncs.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {
                "hosts": [
                    {
                        "address": REDIS_URL,
                        "socket_connect_timeout": REDIS_SOCKET_TIMEOUT_S,
                        "socket_timeout": env.float("CHANNEL_REDIS_SOCKET_TIMEOUT_S", 15.0),
                    }
                ],
            },
        }
    }
else:
    # Telemetry keeps a few keys per node (previous sample, load): the default 300 entries would evict them.
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "OPTIONS": {"MAX_ENTRIES": 1_000_000}}
    }
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

#
# Celery (configured from these settings by clusterctl/celery.py)
#
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=REDIS_URL or "memory://localhost/")
CELERY_RESULT_BACKEND = env.str("CELERY_RESULT_BACKEND", default=REDIS_URL or "cache+memory://")
# Embedded mode has no worker process yet: tasks run inline there (rounds after each submit).
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=EMBEDDED)
# Every this many seconds, a round for each cluster with work (scheduler.tasks.periodic_rounds), whatever became of
# the rounds requested by events: a round lost with a killed worker is made up within one interval.
ROUND_INTERVAL_S = env.float("ROUND_INTERVAL_S", 10.0)
# Jobs a round starts at most (scheduler.core.types.Config.max_placements_per_round; 0: no limit). A round that
# reaches it sends the next round at once: a cluster filling from empty does so in rounds of bounded time and locks.
SCHEDULER_MAX_PLACEMENTS_PER_ROUND = env.int("SCHEDULER_MAX_PLACEMENTS_PER_ROUND", 1500)
if SCHEDULER_MAX_PLACEMENTS_PER_ROUND < 0:
    raise ImproperlyConfigured(
        f"SCHEDULER_MAX_PLACEMENTS_PER_ROUND must be 0 (no limit) or more, not {SCHEDULER_MAX_PLACEMENTS_PER_ROUND}"
    )
CELERY_BEAT_SCHEDULE = {
    "scheduling-rounds": {
        "task": "scheduler.tasks.periodic_rounds",
        "schedule": ROUND_INTERVAL_S,
        "options": {"expires": ROUND_INTERVAL_S},  # a tick that waited a whole interval is replaced by the next one
    },
    # A poll that waited longer than one interval is worthless (the next one is due): it expires unsent.
    "telemetry-poll": {
        "task": "fabric.tasks.poll_all",
        "schedule": env.float("TELEMETRY_INTERVAL_S", 10.0),
        "options": {"expires": env.float("TELEMETRY_INTERVAL_S", 10.0)},
    },
    # Time series upkeep (fabric.actions.rollup_metrics / prune_metrics): both idempotent.
    "telemetry-rollup": {"task": "fabric.tasks.rollup_metrics", "schedule": 60.0},
    "telemetry-prune": {"task": "fabric.tasks.prune_metrics", "schedule": 3600.0},
    # Launches: ack and stop timeouts, and the twin's jobs that reached their est_runtime_s.
    "launch-sweep": {"task": "scheduler.tasks.launch_sweep", "schedule": 10.0},
}
# Health flows back to Slurm (docs/integrations.md "Drain in Slurm"): off, dry-run (log what would be done) or on
# (scontrol drains the nodes a health alert took out of service, and resumes those it drained once the alert cleared).
SLURM_DRAIN = env.str("SLURM_DRAIN", default="off")
if SLURM_DRAIN not in ("off", "dry-run", "on"):
    raise ImproperlyConfigured(f"SLURM_DRAIN must be off, dry-run or on, not {SLURM_DRAIN!r}")
SLURM_DRAIN_INTERVAL_S = env.float("SLURM_DRAIN_INTERVAL_S", 30.0)
SLURM_CONF = env.str("SLURM_CONF", default="")  # the slurm.conf the Slurm commands read ("": their default)
SLURM_BINDIR = env.str("SLURM_BINDIR", default="")  # where scontrol and sinfo are ("": on PATH)
if SLURM_DRAIN != "off":
    CELERY_BEAT_SCHEDULE["slurm-drains"] = {
        "task": "scheduler.tasks.slurm_drains",
        "schedule": SLURM_DRAIN_INTERVAL_S,
        "options": {"expires": SLURM_DRAIN_INTERVAL_S},
    }
# The same for Kubernetes (docs/integrations.md "Cordon in Kubernetes"): off, dry-run or on (PATCH the nodes a health
# alert took out of service to unschedulable, with the annotation clusterctl.io/cordoned, and undo only those), with
# the current context of the kubeconfig K8S_KUBECONFIG; node names in Kubernetes are the stored hosts' names.
K8S_CORDON = env.str("K8S_CORDON", default="off")
if K8S_CORDON not in ("off", "dry-run", "on"):
    raise ImproperlyConfigured(f"K8S_CORDON must be off, dry-run or on, not {K8S_CORDON!r}")
K8S_KUBECONFIG = env.str("K8S_KUBECONFIG", default="")
K8S_CORDON_INTERVAL_S = env.float("K8S_CORDON_INTERVAL_S", 30.0)
if K8S_CORDON != "off":
    if not K8S_KUBECONFIG:
        raise ImproperlyConfigured("K8S_CORDON needs K8S_KUBECONFIG: the kubeconfig whose current context it uses")
    CELERY_BEAT_SCHEDULE["k8s-cordons"] = {
        "task": "scheduler.tasks.k8s_cordons",
        "schedule": K8S_CORDON_INTERVAL_S,
        "options": {"expires": K8S_CORDON_INTERVAL_S},
    }
# Beat (clusterctl/beat.py, docs/deployment.md "Beat"). With Redis: RedBeat, schedule and a lock in Redis, so any
# number of beats may run and only the lock holder sends; a standby takes over once the holder's lock lapses
# (BEAT_LOCK_TIMEOUT_S after its last tick), at once when it can tell that the holder died. Without Redis: Celery's
# file-backed scheduler (one beat only). Either way each tick leaves a heartbeat; /healthz calls beat stalled past
# BEAT_STALE_S.
CELERY_BEAT_SCHEDULER = "clusterctl.beat:RedBeatScheduler" if REDIS_URL else "clusterctl.beat:PersistentScheduler"
CELERY_BEAT_MAX_LOOP_INTERVAL = 5  # seconds between ticks at most: the heartbeat's and the lock renewal's pace
CELERY_REDBEAT_REDIS_URL = REDIS_URL
# The scheduler's own client (the broker's transport options are not its). One immediate retry on a fresh
# connection (the first command after a Redis restart meets the pool's dead one); no more: redis-py's default (10
# retries with backoff) held each tick 4.4 s while Redis refused, and the beat retries every second by itself.
CELERY_REDBEAT_REDIS_OPTIONS = {
    "socket_timeout": REDIS_SOCKET_TIMEOUT_S,
    "socket_connect_timeout": REDIS_SOCKET_TIMEOUT_S,
    "retry": redis_retry.Retry(redis_backoff.NoBackoff(), 1),
}
CELERY_REDBEAT_LOCK_TIMEOUT = env.int("BEAT_LOCK_TIMEOUT_S", default=15)
BEAT_STALE_S = env.float("BEAT_STALE_S", default=30.0)
if CELERY_REDBEAT_LOCK_TIMEOUT <= 2 * CELERY_BEAT_MAX_LOOP_INTERVAL:
    raise ImproperlyConfigured("BEAT_LOCK_TIMEOUT_S must exceed two beat ticks (10 s): the holder renews it each tick")
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = env.str("CELERY_TASK_DEFAULT_QUEUE", default="celery")
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# A message a worker took and did not acknowledge (acks late: it died with it, `kill -9`) goes back to its queue
# visibility_timeout after it was taken; the Redis transport looks for such messages every
# unacked_restore_interval x unacked_restore_throttle seconds. Short, because every task that acknowledges late is
# safe to run twice (rounds lock their cluster and recompute; ingest skips what it has; launch answers name
# their generation and node tasks are idempotent) and a lost launch answer should come back before
# LAUNCH_ACK_TIMEOUT_S rolls the launch back. It must exceed the longest a healthy worker holds a message: its run
# plus its countdown (retries wait 30 s at most); a node_stop waits out the job's grace period (up to an hour), so a
# long one is delivered to its agent a second time and answers that nothing runs any more. Rounds do not depend on
# it (periodic_rounds). docs/deployment.md "Scaling out".
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env.int("BROKER_VISIBILITY_TIMEOUT_S", default=60),
    "unacked_restore_interval": 5,
    "unacked_restore_throttle": 2,
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# kombu's Redis transport with the fix that keeps a worker alive when Redis restarts under a late-acked task
# (clusterctl/broker.py). Only for redis://: rediss:// and socket URLs keep kombu's own, which sets their TLS itself.
if CELERY_BROKER_URL.startswith("redis://"):
    CELERY_BROKER_TRANSPORT = "clusterctl.broker:Transport"
# A worker (and beat's sender) waits for a lost broker as long as it is gone, trying every second or two
# (clusterctl/broker.py); Celery's 100 tries made a worker exit after a few minutes of Redis outage.
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# A late-acked task running when the broker connection drops runs to its end (it needs the database, not Redis); its
# acknowledgement is lost with the connection, so the message is delivered again after BROKER_VISIBILITY_TIMEOUT_S
# and the task runs once more, which every late-acked task here is safe to do. Cancelling it instead (Celery 6's
# default) would kill a round or an ingest in progress for a Redis blip, and it runs again all the same.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
# A publish (a round requested, a launch message) with the broker down gives up after two quick retries: under a
# second when Redis refuses, a few REDIS_SOCKET_TIMEOUT_S when it is silent (kombu's Redis transport otherwise waits
# forever on a silent socket). The request that published has committed and answers; what it could not send follows
# from state (periodic rounds, the launch sweep).
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5}
CELERY_BROKER_TRANSPORT_OPTIONS.update(
    socket_connect_timeout=REDIS_SOCKET_TIMEOUT_S, socket_timeout=REDIS_SOCKET_TIMEOUT_S
)
CELERY_TIMEZONE = "UTC"

#
# Telemetry collectors, by name (fabric/collectors/): dotted paths, so a site can plug in its own.
#
COLLECTORS = {
    "nvml": "fabric.collectors.nvml.NvmlCollector",
    "sysfs-ib": "fabric.collectors.sysfs_ib.SysfsIbCollector",
    "perfquery": "fabric.collectors.perfquery.PerfqueryCollector",
    "prometheus": "fabric.collectors.prometheus.PrometheusCollector",
    "twin": "fabric.collectors.twin.TwinCollector",
}
# Constructor options per collector for the node agents (e.g. {"sysfs-ib": {"root": "/host/sys/class/infiniband"}}).
# A list (nvml,sysfs-ib) gives each collector its own entry; auto also takes "pci_root" and "nvidia_proc".
# perfquery: a switch poll must finish inside poll_switches' 30 s limit, however many switches hang.
# prometheus: a scraped page over PROMETHEUS_SCRAPE_MAX_BYTES is refused (an error in the sample), never parsed.
COLLECTOR_OPTIONS: dict[str, dict] = {
    "perfquery": {"timeout": 5, "budget": 20},
    "prometheus": {"max_bytes": env.int("PROMETHEUS_SCRAPE_MAX_BYTES", default=32 * 1024 * 1024)},
}
# The collector beat polls every node with: one name above, several joined by ',' (nvml,sysfs-ib: GPUs, IB ports and
# HCA GUIDs in one sample), or auto (nvml and sysfs-ib, each where the host has its hardware); empty: no polling.
# Checked at start (fabric.collectors.registry.check_settings): an unknown name stops the process, named.
TELEMETRY_COLLECTOR = env.str("TELEMETRY_COLLECTOR", default="")
TELEMETRY_INTERVAL_S = env.float("TELEMETRY_INTERVAL_S", 10.0)
# Switch ports have no sysfs: one node per cluster (the fabric agent) reads them over the fabric with
# TELEMETRY_SWITCH_COLLECTOR. Host names; "auto" = the first up node of each cluster; empty = no switch polling.
TELEMETRY_FABRIC_AGENTS = env.list("TELEMETRY_FABRIC_AGENTS", default=[])
TELEMETRY_SWITCH_COLLECTOR = env.str("TELEMETRY_SWITCH_COLLECTOR", default="perfquery")
# The fabric agent also reads the subnet managers (saquery SMIR, docs/node-agent.md "The subnet manager") every this
# many seconds, with the perfquery switch collector (0: never; the twin has no SM); TELEMETRY_SM_CA: the HCA saquery
# uses (-C), TELEMETRY_OPENSM_CONF: opensm.conf where the agent's host runs the SM (its routing engine is checked).
TELEMETRY_SM_INTERVAL_S = env.float(
    "TELEMETRY_SM_INTERVAL_S", default=60.0 if TELEMETRY_SWITCH_COLLECTOR == "perfquery" else 0.0
)
TELEMETRY_SM_CA = env.str("TELEMETRY_SM_CA", default="")
TELEMETRY_OPENSM_CONF = env.str("TELEMETRY_OPENSM_CONF", default="")
TELEMETRY_OPENSM_LOG = env.str("TELEMETRY_OPENSM_LOG", default="")  # its opensm.log: state changes, the last sweep
# Poll tasks go to each node's own queue node.<hostname> (its agent). False: the default queue (embedded demo).
TELEMETRY_NODE_QUEUES = env.bool("TELEMETRY_NODE_QUEUES", default=True)
# Results of one poll are ingested together once this many seconds passed since the first arrived.
TELEMETRY_BATCH_WINDOW_S = env.float("TELEMETRY_BATCH_WINDOW_S", 0.5)
# A node whose newest sample is this many polls old is unreachable (alert), and then down (its GPUs leave).
TELEMETRY_UNREACHABLE_POLLS = env.int("TELEMETRY_UNREACHABLE_POLLS", 3)
TELEMETRY_DOWN_POLLS = env.int("TELEMETRY_DOWN_POLLS", 10)
# Only polls actually sent count, and only once ingest caught up with their answers (fabric/telemetry/liveness.py).
# A poll that at least this share of the polled nodes missed at once is the pipeline's trouble, not theirs: no node
# is judged on it, and a few in a row raise one telemetry_stalled alert for the cluster, which takes no capacity.
TELEMETRY_STALLED_FRACTION = env.float("TELEMETRY_STALLED_FRACTION", 0.5)
if not 0 < TELEMETRY_STALLED_FRACTION <= 1:
    raise ImproperlyConfigured("TELEMETRY_STALLED_FRACTION must be in (0, 1]")
# A health alert clears (and gives capacity back) once its condition has been absent this long.
TELEMETRY_HOLD_DOWN_S = env.float("TELEMETRY_HOLD_DOWN_S", 300.0)
# Smoothing of link load for placement: s = alpha * raw + (1 - alpha) * s (the heat map shows raw).
TELEMETRY_EWMA_ALPHA = env.float("TELEMETRY_EWMA_ALPHA", 0.3)
# Time series retention: raw samples (hours), 1-minute rollups (days), 1-hour rollups (days).
TELEMETRY_RETENTION_RAW_H = env.int("TELEMETRY_RETENTION_RAW_H", default=24)
TELEMETRY_RETENTION_MINUTE_D = env.int("TELEMETRY_RETENTION_MINUTE_D", default=7)
TELEMETRY_RETENTION_HOUR_D = env.int("TELEMETRY_RETENTION_HOUR_D", default=90)
if min(TELEMETRY_RETENTION_RAW_H, TELEMETRY_RETENTION_MINUTE_D, TELEMETRY_RETENTION_HOUR_D) < 1:
    raise ImproperlyConfigured("TELEMETRY_RETENTION_* must be at least 1 (the rollups read the tier below)")
# The twin (collector "twin", fabric/stored_twin.py): seed of its fault schedule, faults per simulated hour.
TWIN_SEED = env.int("TWIN_SEED", default=0)
TWIN_FAULT_RATE = env.float("TWIN_FAULT_RATE", default=6.0)

#
# Running jobs (docs/running-jobs.md). LAUNCHER: "twin" plays jobs centrally (nothing is launched; a job ends
# after its est_runtime_s), "process" or "container": the node agents launch them. Default: the twin where the
# twin plays the hardware too (embedded mode, TELEMETRY_COLLECTOR=twin), else process.
#
LAUNCHER = env.str("LAUNCHER", default="twin" if EMBEDDED or TELEMETRY_COLLECTOR == "twin" else "process")
if LAUNCHER not in ("twin", "process", "container", "slurm"):
    raise ImproperlyConfigured(f"LAUNCHER must be twin, process, container or slurm, not {LAUNCHER!r}")
# LAUNCHER=slurm (docs/running-jobs.md "The Slurm launcher"): clusterctl places, Slurm runs. A worker on a Slurm submit
# host consumes the `slurm` queue (sbatch, scancel, squeue, scontrol there, with SLURM_CONF and SLURM_BINDIR above);
# SLURM_TAG marks our jobs' comments (a second clusterctl on the same Slurm uses another), SLURM_PARTITION and
# SLURM_ACCOUNT go to sbatch, SLURM_OUTPUT_DIR (absolute, shared by the nodes) holds cc-<job>-g<generation>-<id>.out
# ("" : Slurm's slurm-<id>.out in the job's working directory); the watcher reads Slurm every SLURM_WATCH_INTERVAL_S.
SLURM_QUEUE = env.str("SLURM_QUEUE", default="slurm")
SLURM_TAG = env.str("SLURM_TAG", default="clusterctl")
SLURM_PARTITION = env.str("SLURM_PARTITION", default="")
SLURM_ACCOUNT = env.str("SLURM_ACCOUNT", default="")
SLURM_OUTPUT_DIR = env.str("SLURM_OUTPUT_DIR", default="")
SLURM_WATCH_INTERVAL_S = env.float("SLURM_WATCH_INTERVAL_S", 10.0)
if SLURM_OUTPUT_DIR and not SLURM_OUTPUT_DIR.startswith("/"):
    raise ImproperlyConfigured(f"SLURM_OUTPUT_DIR must be an absolute path, not {SLURM_OUTPUT_DIR!r}")
# Observe a Slurm cluster clusterctl does not schedule (docs/integrations.md "Observe a Slurm cluster"): the clusters
# whose Slurm jobs are mirrored read-only onto the inventory, every SLURM_OBSERVE_INTERVAL_S (on the `slurm` queue).
SLURM_OBSERVE = env.list("SLURM_OBSERVE", default=[])
SLURM_OBSERVE_INTERVAL_S = env.float("SLURM_OBSERVE_INTERVAL_S", 15.0)
if SLURM_OBSERVE:
    CELERY_BEAT_SCHEDULE["slurm-observe"] = {
        "task": "scheduler.tasks.slurm_observe",
        "schedule": SLURM_OBSERVE_INTERVAL_S,
        "options": {"expires": SLURM_OBSERVE_INTERVAL_S, "queue": SLURM_QUEUE},
    }
if LAUNCHER == "slurm":
    CELERY_BEAT_SCHEDULE["slurm-watch"] = {
        "task": "scheduler.tasks.slurm_watch",
        "schedule": SLURM_WATCH_INTERVAL_S,
        "options": {"expires": SLURM_WATCH_INTERVAL_S, "queue": SLURM_QUEUE},
    }
# Central: every node of a launch must acknowledge (prepare, then start) within this, or the launch is rolled back
# and the job requeued; a stop unconfirmed this long after its grace period is given up (the node is gone).
LAUNCH_ACK_TIMEOUT_S = env.float("LAUNCH_ACK_TIMEOUT_S", 120.0)
LAUNCH_STOP_TIMEOUT_S = env.float("LAUNCH_STOP_TIMEOUT_S", 60.0)
# A prepare, start or stop unanswered this long is sent once more by the launch sweep: its message may never have been
# published (the broker was down at commit). Node tasks are idempotent, so a message that was only slow does no harm.
LAUNCH_RESEND_S = env.float("LAUNCH_RESEND_S", 30.0)
# How long the log API waits for the node agents' tails.
LAUNCH_LOG_TIMEOUT_S = env.float("LAUNCH_LOG_TIMEOUT_S", 5.0)
# Node agent (read on the GPU servers; docs/node-agent.md). CLUSTERCTL_NODE_GPUS: this node's GPU UUIDs, where
# NVML cannot list them; CLUSTERCTL_CONTAINER_CDI: 1/0, empty = CDI for podman, --gpus for docker.
NODE_NAME = env.str("CLUSTERCTL_NODE_NAME", default="")
LAUNCH_RUN_DIR = env.str("CLUSTERCTL_RUN_DIR", default="/var/lib/clusterctl/run")
LAUNCH_LOG_DIR = env.str("CLUSTERCTL_LOG_DIR", default="/var/log/clusterctl/jobs")
LAUNCH_CHECKPOINT_ROOT = env.str("CLUSTERCTL_CHECKPOINT_ROOT", default="/var/lib/clusterctl/checkpoints")
LAUNCH_NODE_GPUS = env.list("CLUSTERCTL_NODE_GPUS", default=[])
LAUNCH_CONTAINER_ENGINE = env.str("CLUSTERCTL_CONTAINER_ENGINE", default="docker")
LAUNCH_CONTAINER_CDI = env.str("CLUSTERCTL_CONTAINER_CDI", default="")
LAUNCH_MPS_PIPE_DIRECTORY = env.str("CLUSTERCTL_MPS_PIPE_DIRECTORY", default="/tmp/nvidia-mps")
LAUNCH_MPS_LOG_DIRECTORY = env.str("CLUSTERCTL_MPS_LOG_DIRECTORY", default="/var/log/nvidia-mps")
LAUNCH_MASTER_PORTS = env.str("CLUSTERCTL_MASTER_PORTS", default="29500-29999")
LAUNCH_WATCH_INTERVAL_S = env.float("CLUSTERCTL_WATCH_INTERVAL_S", 1.0)

#
# The what-if page (/whatif/, docs/policy-lab.md "From the dashboard"): the folders whose trace files it offers
# (default: the Apache/MIT-licensed copies in tests/fixtures, and ../shared/data/traces when it exists), and the
# bounds of one run: jobs (pods for the Alibaba trace), GPUs of a NODESxGPUS cluster, seconds, upload size.
#
_SHARED_TRACES = BASE_DIR.parent / "shared" / "data" / "traces"
WHATIF_TRACE_DIRS = env.list(
    "WHATIF_TRACE_DIRS",
    default=[str(BASE_DIR / "tests" / "fixtures"), *([str(_SHARED_TRACES)] if _SHARED_TRACES.is_dir() else [])],
)
WHATIF_MAX_JOBS = 10_000
WHATIF_MAX_GPUS = 16_384
WHATIF_TIMEOUT_S = 300
WHATIF_UPLOAD_MAX_BYTES = 5 * 1024 * 1024
# Replays run on their own queue, so a burst of them never delays rounds, polls or ingest on the default one; the
# compose file runs a worker for it with this many processes, and the page refuses a run while this many are
# queued or running on the whole site (dashboard.whatif.start_run).
WHATIF_QUEUE = "whatif"
WHATIF_MAX_CONCURRENT = env.int("WHATIF_MAX_CONCURRENT", default=2)
if WHATIF_MAX_CONCURRENT < 1:
    raise ImproperlyConfigured("WHATIF_MAX_CONCURRENT must be at least 1")
CELERY_TASK_ROUTES = {"scheduler.policy_lab.whatif_replay": {"queue": WHATIF_QUEUE}}
# The what-if replay task lives outside scheduler/tasks.py (autodiscovery imports only <app>.tasks).
CELERY_IMPORTS = ("scheduler.policy_lab",)

#
# Request bodies (clusterctl/limits.py, docs/deployment.md "Limits, tokens and sign-ins"). The ASGI layer answers 413
# to a body over its path's limit before Django, authentication or a parser reads it: REQUEST_BODY_MAX_BYTES
# everywhere (JSON, forms), except the uploads listed in REQUEST_BODY_LIMITS (first matching path wins), each with room
# for the form around the file. Django itself keeps at most FILE_UPLOAD_MAX_MEMORY_SIZE of a body or an uploaded file
# in memory; the rest goes to temporary files (uploaded files to FILE_UPLOAD_TEMP_DIR, default the system's temporary
# folder; the raw body always to the system's, TMPDIR).
#
REQUEST_BODY_MAX_BYTES = env.int("REQUEST_BODY_MAX_BYTES", default=1024 * 1024)
# A fabric import (ibnetdiscover, spec, nvidia-smi topo): a 20,000-node ibnetdiscover output is about 15 MB.
FABRIC_IMPORT_MAX_BYTES = env.int("FABRIC_IMPORT_MAX_BYTES", default=64 * 1024 * 1024)
_FORM_OVERHEAD_BYTES = 64 * 1024
REQUEST_BODY_LIMITS = [
    (r"^/api/v1/clusters/[^/]+/import/$", FABRIC_IMPORT_MAX_BYTES + _FORM_OVERHEAD_BYTES),
    (r"^/whatif/$", WHATIF_UPLOAD_MAX_BYTES + _FORM_OVERHEAD_BYTES),
]
DATA_UPLOAD_MAX_MEMORY_SIZE = REQUEST_BODY_MAX_BYTES
FILE_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
FILE_UPLOAD_TEMP_DIR = env.str("FILE_UPLOAD_TEMP_DIR", default="") or None

#
# Auth, API
#
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Operators and tenants sign in on our page (dashboard.views.LoginView): operators land on the overview,
# tenants on /my/. The admin keeps its own login form for its own pages.
LOGIN_URL = "login"
LOGOUT_REDIRECT_URL = "login"

# A password sign-in (those three forms, and any authenticate() given the request) goes through django-axes first: a
# username that failed LOGIN_FAILURE_LIMIT times from one address is locked out from there for LOGIN_LOCKOUT_MINUTES
# (429; a success resets its count; `manage.py axes_reset` lifts every lockout). Counted per username and address,
# so nobody can lock another user out from everywhere; the `login` rate below bounds one address across usernames.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env.int("LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.float("LOGIN_LOCKOUT_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "clusterctl.throttles.client_ip"
LOGIN_THROTTLED_VIEWS = ["login", "admin:login", "rest_framework:login"]

# API tokens (django-rest-knox, clusterctl/tokens.py): stored as SHA-512 digests, several per user, each expiring;
# `Authorization: Token <secret>` as before. Issued by `manage.py tenant_user` / `api_tokens issue` or the admin.
API_TOKEN_TTL_DAYS = env.float("API_TOKEN_TTL_DAYS", default=90)
API_TOKEN_MAX_TTL_DAYS = env.float("API_TOKEN_MAX_TTL_DAYS", default=365)
REST_KNOX = {"TOKEN_TTL": timedelta(days=API_TOKEN_TTL_DAYS), "AUTH_HEADER_PREFIX": "Token"}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "knox.auth.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # Requests per user (`user`), per client address where no login is needed (`anon`), and failed password sign-ins
    # per address (`login`, clusterctl/throttles.py); 429 with Retry-After past a rate. Counted in the default cache
    # (Redis in production: shared by every web process). The address is REMOTE_ADDR, or with TRUSTED_PROXIES=n the
    # n-th entry from the right of X-Forwarded-For (what the nearest proxy saw): 1 behind a TLS proxy.
    "DEFAULT_THROTTLE_CLASSES": ["clusterctl.throttles.AnonRateThrottle", "clusterctl.throttles.UserRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "anon": env.str("API_THROTTLE_ANON", default="60/min"),
        "user": env.str("API_THROTTLE_USER", default="1200/min"),
        "login": env.str("LOGIN_THROTTLE", default="30/hour"),
    },
    "NUM_PROXIES": env.int("TRUSTED_PROXIES", default=1 if env.bool("BEHIND_TLS_PROXY", default=False) else 0),
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "clusterctl.filters.OrderingFilter",  # refuses unknown fields instead of ignoring them
    ],
    "DEFAULT_PAGINATION_CLASS": "clusterctl.pagination.Pagination",
    "PAGE_SIZE": 100,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # Every 400 as field -> [messages], also those a view raises itself (clusterctl/errors.py, clusterctl/openapi.py).
    "EXCEPTION_HANDLER": "clusterctl.errors.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "clusterctl API",
    "DESCRIPTION": (
        "The control plane of GPU clusters on InfiniBand. Tenants submit, watch and cancel their jobs (whole GPUs, "
        "MPS shares, MIG instances, time-slices, gangs; with their place in the queue, why they wait and when they "
        "are expected to start) and read their quotas and pools; operators also manage the fabric inventory "
        "(import, analysis, live load, health) and every tenant's jobs. Authenticate with `Authorization: Token "
        '<token>`. Errors: `{"detail": ...}`, or field -> [messages] for a 400 (docs/api.md).'
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {"JobStatusEnum": "scheduler.choices.JobStatus"},
    # The error answers every operation can give, with their body shapes (clusterctl/openapi.py).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "clusterctl.openapi.declare_error_responses",
    ],
}

#
# I18N, static
#
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = DEBUG

#
# Security: production defaults; DEBUG relaxes only what local HTTP needs
#
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=not DEBUG)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if env.bool("BEHIND_TLS_PROXY", default=False) else None
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = not DEBUG
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=not DEBUG)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=not DEBUG)
SECURE_CONTENT_TYPE_NOSNIFF = True
# Content-Security-Policy: our own origin only; no inline script or style (pages pass data in data- attributes and
# json_script), no CDN. django-csp 4.0 rather than Django 6's SECURE_CSP: the same code must run on Django 5.2 LTS,
# which has no built-in CSP, and one code path tested on both beats a guarded fallback; its view decorators scope
# the few relaxations (the API docs pages, clusterctl/urls.py) to one path each.
# connect-src: 'self' covers same-origin ws(s):// in current browsers (CSP level 3); the allowed hosts' wss:// (and
# ws:// on any port in DEBUG) are listed too for browsers that read 'self' as http(s) only.
_WS_HOSTS = [("*" + h) if h.startswith(".") else h for h in ALLOWED_HOSTS if h != "*"]
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": [
            "'self'",
            *(f"wss://{h}" for h in _WS_HOSTS),
            *((f"ws://{h}:*" for h in _WS_HOSTS) if DEBUG else ()),
        ],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}
X_FRAME_OPTIONS = "DENY"
SECURE_EXEMPT_PATHS = [r"^healthz$"]
# /metrics too: Prometheus scrapes a web process directly over the internal network, in plain HTTP.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]

# /metrics (clusterctl/metrics.py) answers a request with this bearer token, or from these addresses or
# networks (direct connections only: a proxied request needs the token). Empty token: addresses only.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
METRICS_ALLOWED_IPS = env.list("METRICS_ALLOWED_IPS", default=["127.0.0.1", "::1"])

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    # django-axes announces itself at INFO in every process, every management command included ("AXES: BEGIN
    # version ..."); its lockout warnings come from other loggers and still show.
    "loggers": {"axes.apps": {"level": "WARNING"}},
}
