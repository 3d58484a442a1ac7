"""An import and an attach running at once wait for each other; they never deadlock.

import_fabric locks its cluster row first, then writes nodes and HCAs. claim_hcas (ingest, for the node agent) and
attach_hca (by hand) take the cluster row first too: while an import holds it, they have locked no HCA row yet.
attach_hca locked its HCA row, then waited for the cluster row (name_host's node lock joins it, and Cluster.updated
marks the change): an import in between, updating that HCA, would wait for it, and PostgreSQL kill one of the two.
"""

from __future__ import annotations

import threading
from pathlib import Path

import psycopg
import pytest
from django.db import connections, transaction

from fabric import actions
from fabric.actions.imports import import_text
from fabric.importers.ibnetdiscover import parse_ibnetdiscover
from fabric.models import HCA, Cluster, Node
from tests.processes import database_url

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres("row locks as PostgreSQL takes them, seen from a second connection"),
]

X5 = (Path(__file__).parent.parent / "fixtures" / "ibnetdiscover_psmn_x5_unnamed_hcas.topo").read_text()
GLUSTER1 = "0002c90300080e84"


def hca_row_locked(guid: str) -> bool:
    """Whether a second connection finds the HCA's row locked (FOR UPDATE NOWAIT refused) right now."""
    with psycopg.connect(database_url()) as conn:
        try:
            conn.execute("SELECT 1 FROM fabric_hca WHERE guid = %s FOR UPDATE NOWAIT", [guid])
        except psycopg.errors.LockNotAvailable:
            return True
        return False


def in_thread(fn, started: threading.Event | None = None) -> tuple[threading.Thread, list]:
    errors: list = []

    def body() -> None:
        try:
            fn()
        except Exception as exc:
            errors.append(exc)
        finally:
            if started is not None:
                started.set()
            connections.close_all()

    thread = threading.Thread(target=body)
    thread.start()
    return thread, errors


def attach_while_an_import_holds_its_cluster(attach) -> tuple[bool, bool]:
    """(whether `attach` waited for the import, whether it held the HCA's row while waiting)."""
    import_text("x5", "ibnetdiscover", X5, source="x5.topo")
    cluster = Cluster.objects.get(name="x5")
    Node.objects.create(cluster=cluster, hostname="r510gluster1")
    parsed = parse_ibnetdiscover(X5)
    importing, release = threading.Event(), threading.Event()

    def hold_import() -> None:
        with transaction.atomic():
            actions.import_fabric("x5", parsed, fmt="ibnetdiscover")  # holds the cluster row until the commit
            importing.set()
            release.wait(30)

    importer, import_errors = in_thread(hold_import)
    assert importing.wait(30)
    attacher, attach_errors = in_thread(lambda: attach(cluster.pk))
    try:
        attacher.join(1.0)
        waited, held = attacher.is_alive(), hca_row_locked(GLUSTER1)
    finally:
        release.set()
        importer.join(30)
        attacher.join(30)
    assert (import_errors, attach_errors) == ([], [])
    assert HCA.objects.get(guid=GLUSTER1).node.hostname == "r510gluster1"  # it ran, after the import
    return waited, held


def test_a_node_agents_claim_waits_for_an_import_holding_no_hca():
    def claim(cluster_id: int) -> None:
        actions.claim_hcas(cluster_id, "r510gluster1", [(GLUSTER1, "mlx4_0")])

    assert attach_while_an_import_holds_its_cluster(claim) == (True, False)


def test_attach_hca_by_hand_waits_for_an_import_holding_no_hca():
    def attach(cluster_id: int) -> None:
        actions.attach_hca(cluster_id, GLUSTER1, "r510gluster1")

    assert attach_while_an_import_holds_its_cluster(attach) == (True, False)
