"""The production deployment files, checked by parsing them (Docker itself is not needed).

docker-compose.yml, Dockerfile, .dockerignore, .env.example and docs/deployment.md must agree with each other and
with the code they start: clusterctl/settings.py (the environment variables), clusterctl/asgi.py, clusterctl/celery.py
and the /healthz route. No database, no Django settings.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
ENV_EXAMPLE = ROOT / ".env.example"
DEPLOYMENT_MD = ROOT / "docs" / "deployment.md"
SETTINGS = ROOT / "clusterctl" / "settings.py"

APP_SERVICES = ("migrate", "web", "worker", "whatif-worker", "beat")
LONG_RUNNING_APP_SERVICES = ("web", "worker", "whatif-worker", "beat")
ONE_SHOT_SERVICES = {"migrate"}
# Read by docker compose (docker-compose.yml and the postgres image), not by the app.
COMPOSE_ONLY_VARIABLES = {"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB", "WEB_WORKERS"}

# env.str("NAME", ...), env.bool("NAME"), env("NAME"), os.environ.get("NAME"), os.environ["NAME"], os.getenv("NAME")
_SETTINGS_VAR_RE = re.compile(
    r"""(?:\benv(?:\.\w+)?\(|os\.environ(?:\.get)?[\[(]|os\.getenv\()\s*["']([A-Z][A-Z0-9_]*)["']"""
)
# NAME=value, or #NAME=value for an optional one shown with its default.
_ENV_LINE_RE = re.compile(r"^#?\s*([A-Z][A-Z0-9_]*)=(.*)$")


def settings_variables() -> set[str]:
    return set(_SETTINGS_VAR_RE.findall(SETTINGS.read_text()))


def env_example_lines() -> dict[str, tuple[bool, str]]:
    """NAME -> (active, value) for every variable line of .env.example (active: not commented out)."""
    found: dict[str, tuple[bool, str]] = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        m = _ENV_LINE_RE.match(line.strip())
        if m:
            assert m.group(1) not in found, f".env.example lists {m.group(1)} twice"
            found[m.group(1)] = (not line.startswith("#"), m.group(2))
    return found


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict[str, dict]:
    return compose["services"]


def command(service: dict) -> list[str]:
    cmd = service.get("command")
    assert cmd, "service has no command"
    return shlex.split(cmd) if isinstance(cmd, str) else [str(part) for part in cmd]


def healthcheck_test(service: dict) -> str:
    hc = service.get("healthcheck") or {}
    test = hc.get("test")
    if isinstance(test, list):
        return " ".join(str(part) for part in test)
    return str(test or "")


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with line continuations joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        pending += line
        keyword, _, rest = pending.partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
        pending = ""
    assert not pending, "Dockerfile ends inside a line continuation"
    return instructions


def dockerfile(keyword: str) -> list[str]:
    return [args for kw, args in dockerfile_instructions() if kw == keyword]


#
# docker-compose.yml
#


def test_compose_has_the_production_services(services):
    assert {"postgres", "redis", *APP_SERVICES} <= set(services)
    assert services["postgres"]["image"].split(":")[0] == "postgres"
    assert services["redis"]["image"].split(":")[0] == "redis"


def test_every_long_running_service_has_a_healthcheck(services):
    for name, service in services.items():
        hc = service.get("healthcheck") or {}
        if name in ONE_SHOT_SERVICES:
            continue
        assert not hc.get("disable"), f"{name}: healthcheck disabled"
        test = hc.get("test")
        assert test, f"{name}: no healthcheck"
        assert isinstance(test, list) and test[0] in ("CMD", "CMD-SHELL") and len(test) > 1, f"{name}: {test!r}"


def test_one_shot_migrate_runs_once_and_is_not_health_checked(services):
    migrate = services["migrate"]
    assert command(migrate) == ["python", "manage.py", "migrate", "--noinput"]
    assert migrate["restart"] == "no", "a one-shot service restarted by policy would migrate in a loop"
    # The image's HEALTHCHECK (HTTP on :8000) means nothing for a migration run.
    assert (migrate.get("healthcheck") or {}).get("disable") is True


def test_app_services_share_one_image(services):
    images = {services[name].get("image") for name in APP_SERVICES}
    builds = {json.dumps(services[name].get("build"), sort_keys=True) for name in APP_SERVICES}
    assert len(images) == 1 and None not in images, images
    assert len(builds) == 1 and "null" not in builds, builds


def test_app_services_read_env_file_and_use_the_compose_stores(services):
    for name in APP_SERVICES:
        service = services[name]
        env_file = service.get("env_file")
        env_files = [env_file] if isinstance(env_file, str) else env_file
        assert ".env" in env_files, name
        env = service["environment"]
        assert re.fullmatch(r"postgres://[^@/]+@postgres:5432/\S+", env["DATABASE_URL"]), env["DATABASE_URL"]
        assert env["REDIS_URL"] == "redis://redis:6379/0"


def test_long_running_services_restart(services):
    for name in ("postgres", "redis", *LONG_RUNNING_APP_SERVICES):
        assert services[name].get("restart") == "unless-stopped", name


def test_depends_on_waits_for_healthy_stores_and_finished_migrations(services):
    for name in LONG_RUNNING_APP_SERVICES:
        deps = services[name]["depends_on"]
        assert isinstance(deps, dict), f"{name}: depends_on must use conditions, not a bare list"
        assert deps["postgres"]["condition"] == "service_healthy", name
        assert deps["redis"]["condition"] == "service_healthy", name
        assert deps["migrate"]["condition"] == "service_completed_successfully", name
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_web_serves_the_asgi_application(services):
    web = services["web"]
    cmd = command(web)
    # uvicorn streams the body to the app, so the body limits refuse an oversized one before it is read (daphne reads
    # it whole first: tests/security/test_body_limits.py).
    assert cmd[0] == "uvicorn"
    assert "clusterctl.asgi:application" in cmd
    assert cmd[cmd.index("--port") + 1] == "8000"
    assert cmd[cmd.index("--host") + 1] == "0.0.0.0"
    # The live frames are compact already; deflating each one per socket tripled push latency at 1,000 sockets.
    assert cmd[cmd.index("--ws-per-message-deflate") + 1] == "false"
    # Two processes by default (WEB_WORKERS): a push to 1,000 sockets fans out on two cores, not one.
    assert cmd[cmd.index("--workers") + 1] == "${WEB_WORKERS:-2}"
    assert any(str(port).split("/")[0].endswith(":8000") for port in web["ports"]), web["ports"]
    assert "/healthz" in healthcheck_test(web)
    # Django: "When using ASGI, persistent connections should be disabled."
    assert str(web["environment"]["DB_CONN_MAX_AGE"]) == "0"


def test_worker_and_beat_run_the_clusterctl_celery_app(services):
    worker, beat = command(services["worker"]), command(services["beat"])
    assert worker[:4] == ["celery", "-A", "clusterctl", "worker"]
    assert beat[:4] == ["celery", "-A", "clusterctl", "beat"]


def option(cmd: list[str], name: str) -> str:
    assert cmd.count(name) == 1, (name, cmd)
    return cmd[cmd.index(name) + 1]


def test_the_default_worker_consumes_only_the_default_queue(services):
    worker = command(services["worker"])
    assert option(worker, "-Q") == "${CELERY_TASK_DEFAULT_QUEUE:-celery}"


def test_whatif_replays_have_a_worker_of_their_own_capped_like_the_page(services):
    whatif = command(services["whatif-worker"])
    assert whatif[:4] == ["celery", "-A", "clusterctl", "worker"]
    queue = re.search(r'^WHATIF_QUEUE = "([^"]+)"$', SETTINGS.read_text(), re.M).group(1)
    assert option(whatif, "-Q") == queue == "whatif"
    assert re.search(
        r'CELERY_TASK_ROUTES = \{"scheduler.policy_lab.whatif_replay": \{"queue": WHATIF_QUEUE\}', SETTINGS.read_text()
    )
    default = re.search(r'env.int\("WHATIF_MAX_CONCURRENT", default=(\d+)\)', SETTINGS.read_text()).group(1)
    assert option(whatif, "--concurrency") == "${WHATIF_MAX_CONCURRENT:-" + default + "}"
    assert option(whatif, "-n") == "whatif@%h"
    assert "-d whatif@$$HOSTNAME" in healthcheck_test(services["whatif-worker"])


def test_worker_healthcheck_pings_this_worker(services):
    test = healthcheck_test(services["worker"])
    assert "celery -A clusterctl inspect ping" in test
    # $$ escapes compose interpolation: the shell in the container expands its own $HOSTNAME.
    assert "-d celery@$$HOSTNAME" in test


def test_store_healthchecks(services):
    assert "pg_isready" in healthcheck_test(services["postgres"])
    assert "redis-cli ping" in healthcheck_test(services["redis"])


def test_beat_uses_the_lock_holding_scheduler_so_a_second_beat_is_safe(services):
    beat = command(services["beat"])
    # The scheduler comes from the settings (RedBeat when REDIS_URL is set, as compose sets it): neither a command-line
    # scheduler nor a schedule file may replace it with one that does not hold a lock.
    assert not {"-S", "--scheduler", "-s", "--schedule"} & set(beat), beat
    assert re.search(
        r'^CELERY_BEAT_SCHEDULER = "clusterctl\.beat:RedBeatScheduler" if REDIS_URL', SETTINGS.read_text(), re.M
    )
    assert "REDIS_URL" in services["beat"]["environment"]
    assert "heartbeat_age" in healthcheck_test(services["beat"])


def test_stores_are_not_published_on_the_host(services):
    for name in ("postgres", "redis"):
        assert not services[name].get("ports"), f"{name} must only be reachable on the compose network"


def test_web_healthcheck_matches_the_image_healthcheck(services):
    (image_check,) = dockerfile("HEALTHCHECK")
    exec_form = json.loads(image_check[image_check.index("CMD") + len("CMD") :].strip())
    assert services["web"]["healthcheck"]["test"] == ["CMD", *exec_form]


def test_compose_header_explains_scaling_and_the_beat_lock():
    header = COMPOSE.read_text().split("\nx-app:", 1)[0]
    assert "docker compose up -d --scale worker=4 --scale web=2" in header
    assert "only the beat holding the lock sends" in header
    assert "docker compose run --rm web python manage.py createsuperuser" in header


@pytest.mark.skipif(
    not (shutil.which("docker-compose") or shutil.which("docker")), reason="no docker compose client here"
)
def test_compose_file_is_valid_for_docker_compose(tmp_path):
    """`docker compose config` validates against the Compose schema (needs no daemon); skipped without a client."""
    shutil.copy(COMPOSE, tmp_path / "docker-compose.yml")
    (tmp_path / ".env").write_text("SECRET_KEY=x\nPOSTGRES_PASSWORD=pw\n")
    for cmd in (["docker", "compose"], ["docker-compose"]):
        if not shutil.which(cmd[0]):
            continue
        probe = subprocess.run([*cmd, "version"], capture_output=True, text=True, check=False)
        if probe.returncode != 0:
            continue
        result = subprocess.run([*cmd, "config", "-q"], cwd=tmp_path, capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stderr
        return
    pytest.skip("no working docker compose client here")


#
# Dockerfile, .dockerignore
#


def test_dockerfile_builds_one_non_root_image_from_pyproject():
    assert dockerfile("FROM") == ["python:3.12-slim"]
    runs = " ".join(dockerfile("RUN"))
    assert re.search(r"\bpip install \.(\s|$)", runs), "the project must be installed from pyproject.toml"
    assert "collectstatic --noinput" in runs
    users = dockerfile("USER")
    assert users and users[-1].split(":")[0] not in ("root", "0"), users
    assert dockerfile("EXPOSE") == ["8000"]


def test_dockerfile_bakes_no_secret():
    for keyword in ("ENV", "ARG"):
        for args in dockerfile(keyword):
            assert "SECRET_KEY" not in args, f"{keyword} {args}: a SECRET_KEY must never be part of the image"
    # The build-time key used by collectstatic is scoped to its RUN command.
    (collect,) = [args for args in dockerfile("RUN") if "collectstatic" in args]
    assert "SECRET_KEY=" in collect and "DEBUG=0" in collect


def test_dockerfile_cmd_and_healthcheck_reference_what_exists(services):
    (cmd,) = dockerfile("CMD")
    argv = json.loads(cmd)
    # The image's default CMD is the web service, compose's ${VAR:-default}s at their defaults.
    web = [re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", arg) for arg in command(services["web"])]
    assert argv == web, "the image's default CMD is the web service"
    module, _, attr = next(arg for arg in argv if re.fullmatch(r"[\w.]+:\w+", arg)).partition(":")
    module_file = ROOT.joinpath(*module.split(".")).with_suffix(".py")
    assert module_file.is_file(), module_file
    assert re.search(rf"^{attr}\s*=", module_file.read_text(), re.M), f"{module_file} defines no {attr}"

    (check,) = dockerfile("HEALTHCHECK")
    assert "urllib" in check and "curl" not in check and "wget" not in check
    assert "http://127.0.0.1:8000/healthz" in check
    urls = (ROOT / "clusterctl" / "urls.py").read_text()
    assert re.search(r"""path\(\s*["']healthz["']""", urls), "clusterctl/urls.py has no healthz route"
    assert (ROOT / "clusterctl" / "health.py").is_file()

    # celery -A clusterctl and python manage.py, as the compose services run them.
    assert re.search(r"^app\s*=\s*Celery\(", (ROOT / "clusterctl" / "celery.py").read_text(), re.M)
    assert (ROOT / "manage.py").is_file()


def test_dockerfile_copies_files_that_exist():
    for args in dockerfile("COPY"):
        sources = args.split()[:-1]
        for src in sources:
            if src.startswith("--"):
                continue
            assert (ROOT / src).exists(), f"COPY {src}: no such path"


def test_dockerignore_keeps_local_state_and_secrets_out():
    patterns = {line.strip() for line in DOCKERIGNORE.read_text().splitlines() if line.strip() and line[0] != "#"}
    for needed in (".env", ".venv", "var", ".git", "staticfiles", "**/__pycache__"):
        assert needed in patterns, needed


#
# Environment variables: settings.py, .env.example, docs/deployment.md
#


def test_settings_variables_are_found():
    found = settings_variables()
    # Guard against a regex that silently matches nothing.
    assert {"DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "DATABASE_URL", "REDIS_URL"} <= found, found


def test_every_settings_variable_is_in_env_example():
    missing = settings_variables() - set(env_example_lines())
    assert not missing, f"read by clusterctl/settings.py but not in .env.example: {sorted(missing)}"


def test_every_env_example_variable_is_used():
    listed = set(env_example_lines())
    unread = listed - settings_variables() - COMPOSE_ONLY_VARIABLES
    assert not unread, f"in .env.example but not read by clusterctl/settings.py: {sorted(unread)}"
    compose_text = COMPOSE.read_text()
    for name in COMPOSE_ONLY_VARIABLES & listed:
        assert "${" + name in compose_text, f"{name} is in .env.example but docker-compose.yml does not use it"


def test_every_variable_is_documented_in_deployment_md():
    doc = DEPLOYMENT_MD.read_text()
    table_rows = {m.group(1) for m in re.finditer(r"^\|\s*`([A-Z][A-Z0-9_]*)`\s*\|", doc, re.M)}
    missing = (settings_variables() | COMPOSE_ONLY_VARIABLES) - table_rows
    assert not missing, f"no row in the docs/deployment.md variable tables for: {sorted(missing)}"


def test_env_example_ships_no_usable_secret():
    lines = env_example_lines()
    assert lines["DEBUG"] == (True, "0")
    # Empty on purpose: the settings (SECRET_KEY) and compose (POSTGRES_PASSWORD) refuse to start until set.
    assert lines["SECRET_KEY"] == (True, "")
    assert lines["POSTGRES_PASSWORD"] == (True, "")


def test_env_example_values_survive_compose_and_environ_parsing():
    for name, (_active, value) in env_example_lines().items():
        assert "$" not in value, f"{name}: compose would interpolate '$'"
        assert not value.startswith(("'", '"')), f"{name}: quotes are parsed differently by compose and environ"
        assert " #" not in value, f"{name}: inline comments are parsed differently by compose and environ"
