"""`manage.py bench_scheduler` (issue 16's bench of rounds against the database), on a small cluster: it runs every
part it reports and prints each figure."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from scheduler import rounds

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_carries():
    rounds._CARRIES.clear()
    yield
    rounds._CARRIES.clear()


def test_the_bench_prints_its_rounds_warm_up_and_peak_memory():
    out, err = StringIO(), StringIO()
    call_command("bench_scheduler", gpus=64, pending=100, rounds=1, churn_rounds=2, seed=3, stdout=out, stderr=err)
    text, said = out.getvalue(), err.getvalue()
    assert "warm-up: " in said and " ms (a worker's" in said  # the process had no carry for the new cluster
    for line in ("engine round:", "full round:", "committed:", "fill:", "churn round:", "peak RSS:"):
        assert line in text, line


def test_the_json_names_the_peak_memory():
    out = StringIO()
    call_command(
        "bench_scheduler", gpus=64, pending=100, rounds=1, churn_rounds=1, json=True, stdout=out, stderr=StringIO()
    )
    result = json.loads(out.getvalue())
    assert result["gpus"] == 64 and result["warm_up_s"] > 0
    assert result["peak_rss_mib"] > 50  # a Django process with the cluster loaded: tens of MiB at least
