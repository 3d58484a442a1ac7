"""The fabric planner page (/plan/): `manage.py plan_fabric`'s comparison in the browser (docs/fabric-planning.md).

A GET form: the page changes nothing (building a design as a cluster stays with the command), so the inputs are
the query string and a plan can be linked to."""

from __future__ import annotations

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from dashboard.views import _common, operator_required
from fabric.topology.link_speeds import SPEEDS
from fabric.topology.plan import RADIXES, PlanError, PlanRequest
from scheduler.sim.fabric_plan import JOB_SIZES, MESSAGE_BYTES, compare_designs

MAX_GPUS = 1_000_000


class PlanForm(forms.Form):
    gpus = forms.IntegerField(min_value=1, max_value=MAX_GPUS, initial=1024)
    gpus_per_server = forms.IntegerField(min_value=1, max_value=72, initial=8, label="GPUs per server")
    hcas_per_server = forms.IntegerField(min_value=1, max_value=16, initial=8, label="HCAs per server")
    rate = forms.ChoiceField(choices=[(f"4x{s}", f"4x{s}") for s in SPEEDS], initial="4xNDR", label="Link rate")
    radix = forms.TypedChoiceField(choices=[(r, f"{r} ports") for r in RADIXES], coerce=int, initial=64)


def _times(a) -> str:
    if a.best_s is None:
        return "—"
    return f"{a.best_s * 1e3:.1f} / {a.worst_s * 1e3:.1f}"


@operator_required
def plan_page(request: HttpRequest) -> HttpResponse:
    if request.method not in ("GET", "HEAD"):
        return HttpResponse(status=405, headers={"Allow": "GET, HEAD"})
    form = PlanForm(request.GET or None)
    rows, req, status = [], None, 200
    if form.is_bound and form.is_valid():
        c = form.cleaned_data
        req = PlanRequest(c["gpus"], c["gpus_per_server"], c["hcas_per_server"], c["rate"], c["radix"])
        try:
            rows = [(d, [_times(a) for a in ars]) for d, ars in compare_designs(req)]
        except PlanError as exc:
            form.add_error(None, str(exc))
            req, status = None, 400
    elif form.is_bound:
        status = 400
    context = {"form": form, "req": req, "rows": rows, "job_sizes": JOB_SIZES, "page": "plan",
               "message_gib": MESSAGE_BYTES / 2**30, **_common()}  # fmt: skip
    return render(request, "dashboard/plan.html", context, status=status)
