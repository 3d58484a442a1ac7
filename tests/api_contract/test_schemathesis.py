"""The API does what its OpenAPI schema says: schemathesis plays every operation in-process against the WSGI app,
as a tenant and as an operator, and checks each answer (no server error; status code, content type, headers and
body as declared; schema-violating input refused; for reads, schema-valid input accepted).

Before issue 11 the same run (schemathesis' CLI, `--checks all`) found 43 violations as a tenant and 54 as an
operator: undeclared 400/403/404/409 answers, `?offset=null` and `?held=null` accepted, bounds enforced but not
declared. Bounded (20 examples an operation, derandomized, no example database) so it is the same every run."""

from __future__ import annotations

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig

from scheduler import actions
from scheduler.launch.checks import IMAGE_PATTERN
from scheduler.models import PriorityClass
from tests.factories import fat_tree
from tests.scheduler.api.helpers import token_client

# Every check of schemathesis' "all", bounded and derandomized so that a run is the same every time. A write the
# schema allows may still be refused for what a schema cannot say (a pool that does not exist, a cluster name already
# taken, a file that is not UTF-8 text), so "valid data is accepted" is asked of reads only.
CONFIG = SchemathesisConfig.from_str(
    """
[generation]
max-examples = 20
deterministic = true
[checks]
enabled = true
[[operations]]
include-method = ["POST", "PUT", "PATCH", "DELETE"]
checks.positive_data_acceptance.enabled = false
"""
)


pytestmark = pytest.mark.django_db


def _load_schema():
    # Generated the way /api/v1/schema/ serves it (no HTTP round trip, no database), then played in-process.
    from drf_spectacular.generators import SchemaGenerator

    document = SchemaGenerator().get_schema(request=None, public=True)
    _without_image_length(document)
    loaded = schemathesis.openapi.from_dict(document, config=CONFIG)
    loaded.app = get_wsgi_application()
    return loaded


def _without_image_length(node) -> None:
    """Schemathesis folds an image reference's maxLength (255) into its pattern (the OCI grammar), and its Rust
    canonicaliser sometimes refuses the result as an invalid pattern (InvalidRegexPattern for POST /jobs/, seen
    once in a full run under load, never alone). The length bound is held by tests/scheduler/api/
    test_hostile_fields.py; here the image keeps its pattern and loses its maxLength."""
    if isinstance(node, dict):
        if node.get("pattern") == IMAGE_PATTERN:
            node.pop("maxLength", None)
        for value in node.values():
            _without_image_length(value)
    elif isinstance(node, list):
        for value in node:
            _without_image_length(value)


schema = _load_schema()


@pytest.fixture(autouse=True)
def _keep_connection():
    # As Django's test client does: a request's end must not close the connection that holds the test's transaction.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def site(db, django_user_model):
    cluster = fat_tree("contract", nodes=2, gpus_per_node=8, gpu_model="H100", leaf_ports=16, storage_nodes=1)
    pool = actions.ensure_scheduler(cluster)
    tenant = actions.create_tenant("tenant-a")
    actions.set_quota(tenant, pool, guaranteed_gpus=8, borrow_limit=4)
    user = django_user_model.objects.create_user("alice", "alice@a.example.org", "pw-alice")
    actions.add_member(tenant, user)
    operator = django_user_model.objects.create_user("ops", "ops@example.org", "pw-ops", is_staff=True)
    # One job, so that a job's own pages have something to answer with.
    actions.submit_job(tenant, pool, PriorityClass.objects.get(name="normal"), name="train", gpus=2, command="x")
    return {"tenant": _headers(user), "operator": _headers(operator)}


def _headers(user) -> dict[str, str]:
    return {"Authorization": token_client(user)._credentials["HTTP_AUTHORIZATION"]}


@schema.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_as_tenant(case, site):
    case.call_and_validate(headers=site["tenant"])


@schema.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_as_operator(case, site):
    case.call_and_validate(headers=site["operator"])
