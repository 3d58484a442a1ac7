"""Mutated real captures through the whole import, into the database (issue 13: no input makes it crash).

One cluster takes every example in turn, so later imports update, recable and rename what earlier ones stored
(the paths an IntegrityError hid in before). The contract: the import succeeds, or it raises ParseError or
ActionError and the database is as it was before that import. Derandomized and bounded (a few seconds each).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from fabric.actions import ActionError
from fabric.actions.imports import import_text
from fabric.importers.types import ParseError
from fabric.models import HCA, Link, Node, Port, Switch
from tests.fabric.importers.test_fuzz import mutated

pytestmark = pytest.mark.django_db

DB_FUZZ = settings(
    max_examples=40, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)


def snapshot() -> tuple:
    return tuple(
        sorted(model.objects.values_list(*fields), key=repr)
        for model, fields in (
            (Switch, ("guid", "name")),
            (Node, ("hostname", "unnamed")),
            (HCA, ("guid", "node_id", "kind")),
            (Port, ("number", "switch_id", "hca_id", "link_id", "link_end")),
            (Link, ("id", "state", "loopback")),
        )
    )


@pytest.mark.parametrize("fmt", ["ibnetdiscover", "ibnetdiscover-ports", "spec"])
def test_mutated_captures_import_or_are_refused_cleanly(fmt: str) -> None:
    @DB_FUZZ
    @given(text=mutated(fmt))
    def run(text: str) -> None:
        before = snapshot()
        try:
            import_text("fuzz", fmt, text, source="fuzz")
        except (ParseError, ActionError) as exc:
            assert str(exc)
            assert snapshot() == before

    run()
