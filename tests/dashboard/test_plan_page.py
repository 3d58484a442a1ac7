"""The fabric planner page (/plan/): operators only, the comparison table, bad input named."""

from __future__ import annotations

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_anonymous_users_go_to_the_login_page(client):
    response = client.get(reverse("plan"))
    assert (response.status_code, response["Location"].split("?")[0]) == (302, reverse("login"))


def test_a_tenant_is_refused(client, tenant_user):
    client.force_login(tenant_user)
    assert client.get(reverse("plan")).status_code == 403


def test_an_operator_sees_the_designs_with_the_hand_counted_row(client, operator):
    client.force_login(operator)
    response = client.get(reverse("plan"), {"gpus": 1024, "gpus_per_server": 8, "hcas_per_server": 8,
                                            "rate": "4xNDR", "radix": 64})  # fmt: skip
    assert response.status_code == 200
    html = response.content.decode()
    row = html.split('data-design="2t-1:1-rail"')[1].split("</tr>")[0]
    cells = [c.split("</td>")[0] for c in row.split("<td>")[1:]]
    # design, leaves, spines, cores, host, leaf-spine, spine-core, bisection Gb/s, GPUs under one leaf, 64, 512 GPUs
    assert cells[:9] == ["2t-1:1-rail", "32", "16", "0", "1024", "1024", "0", "204800", "256"]
    assert cells[9] == "6.1 / 6.9"
    assert "not needed: 1,024 endpoints fit two tiers" in html


def test_the_empty_form_shows_no_table(client, operator):
    client.force_login(operator)
    response = client.get(reverse("plan"))
    assert response.status_code == 200 and b'data-testid="plan-table"' not in response.content


def test_a_radix_not_offered_is_a_form_error(client, operator):
    client.force_login(operator)
    response = client.get(reverse("plan"), {"gpus": 1024, "gpus_per_server": 8, "hcas_per_server": 8,
                                            "rate": "4xNDR", "radix": 48})  # fmt: skip
    assert response.status_code == 400
    assert b"48 is not one of the available choices" in response.content
