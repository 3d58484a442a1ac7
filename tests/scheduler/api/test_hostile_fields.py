"""Submitting a job whose values would reach a node's command line unsafely: 400 naming the field, nothing stored.
The node agent checks the same again (tests/scheduler/launch/test_hostile_inputs.py)."""

from __future__ import annotations

import re

import pytest
from django.core.exceptions import ValidationError

from scheduler.launch.checks import IMAGE_PATTERN, image_problem
from scheduler.models import Job
from tests.scheduler.api.helpers import JOBS

pytestmark = pytest.mark.django_db


def _refused(api, site, field: str, **body) -> str:
    """POST must answer 400 with errors on `field` alone, store nothing; the field's messages as text."""
    jobs = Job.objects.count()
    resp = api.post(JOBS, {"name": "j", "pool": site.default.pk, "gpus": 1, **body}, format="json")
    assert resp.status_code == 400, resp.content[:300]
    assert list(resp.json()) == [field], resp.json()
    assert Job.objects.count() == jobs
    return str(resp.json()[field])


def test_the_issue_exploit_is_refused_naming_the_image(api_a, site):
    message = _refused(api_a, site, "image", image="--privileged", command="-v=/:/host ubuntu chroot /host")
    assert message == str(
        ["'--privileged' starts with '-': an image reference never does (it would be read as an option)"]
    )


@pytest.mark.parametrize(
    "image", ["-v=/:/host", "ubuntu --privileged", "ubuntu\n", "Ubuntu:22.04", "ubuntu:", "a" * 256, "img;id"]
)
def test_an_image_that_is_not_an_image_reference_is_refused(api_a, site, image):
    _refused(api_a, site, "image", image=image, command="x")


def test_an_image_reference_is_accepted(api_a, site):
    resp = api_a.post(
        JOBS, {"name": "j", "pool": site.default.pk, "gpus": 1, "image": "localhost:5000/team/train:v1"}, format="json"
    )
    assert resp.status_code == 201, resp.json()


@pytest.mark.parametrize(
    ("workdir", "words"),
    [
        ("relative/dir", "is not an absolute path"),
        ("/data/../etc", "'..' component"),
        ("/data\n--privileged", "control character"),
        ("/data\x00", "Null characters are not allowed"),
    ],
)
def test_an_unsafe_working_directory_is_refused(api_a, site, workdir, words):
    assert words in _refused(api_a, site, "workdir", workdir=workdir, command="x")


def test_a_command_with_nul_is_refused(api_a, site):
    assert "Null characters are not allowed" in _refused(api_a, site, "command", command="python x.py\x00--evil")


def test_a_command_over_64_kib_is_refused(api_a, site):
    assert _refused(api_a, site, "command", command="é" * 40_000) == str(
        ["the command is 80,000 bytes; at most 65,536"]
    )


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"A=B": "x"}, "'A=B' is not valid"),
        ({"A\n": "x"}, "is not valid"),
        ({"A": "x\x00"}, "Null characters are not allowed"),
        ({f"V{i}": "x" for i in range(257)}, "at most 256"),
    ],
)
def test_an_unsafe_environment_is_refused(api_a, site, env, words):
    assert words in _refused(api_a, site, "env", env=env, command="x")


def test_a_tenants_run_as_must_be_an_unprivileged_uid_gid(site):
    site.tenant_a.run_as = "0:0"
    with pytest.raises(ValidationError, match="a job never runs as root"):
        site.tenant_a.full_clean()
    site.tenant_a.run_as = "2001:2001"
    site.tenant_a.full_clean()


def test_the_schema_declares_the_image_grammar():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    # A reference, or the empty text (no image: the process launcher's jobs).
    reference, empty = schema["components"]["schemas"]["JobRequest"]["properties"]["image"]["oneOf"]
    assert reference == {"type": "string", "maxLength": 255, "pattern": IMAGE_PATTERN}
    assert empty == {"type": "string", "maxLength": 0}
    for value in ("ubuntu", "localhost:5000/team/train:v1", "--privileged", "Ubuntu", "ubuntu --privileged"):
        assert bool(re.fullmatch(reference["pattern"], value)) is (image_problem(value) is None), value
