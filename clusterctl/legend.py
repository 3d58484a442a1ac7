"""Every state of every app with its label and colour: one legend for admin, API, pages and heat maps."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from fabric.choices import ALL_CHOICES as FABRIC
from scheduler.api.access import tenant_of
from scheduler.choices import ALL_CHOICES as SCHEDULER
from scheduler.selectors import priority_class_choices


def legends() -> dict[str, list[dict[str, str]]]:
    return {name: choices.legend() for name, choices in {**FABRIC, **SCHEDULER}.items()}


_LEGEND_ITEM = {
    "type": "object",
    "properties": {"value": {"type": "string"}, "label": {"type": "string"}, "colour": {"type": "string"}},
    "required": ["value", "label", "colour"],
}
_PRIORITY_CLASS = {
    "type": "object",
    "properties": {
        "value": {"type": "string", "description": "The name a job's priority_class takes."},
        "label": {"type": "string"},
        "priority": {"type": "integer", "description": "Higher runs first and may preempt lower."},
        "preemptible_default": {"type": "boolean"},
        "always_preemptible": {"type": "boolean", "description": "Its jobs cannot ask for preemptible=false."},
        "allowed": {
            "type": ["boolean", "null"],
            "description": "Whether the caller's tenant may ask for it; null for an account in no tenant.",
        },
    },
    "required": ["value", "label", "priority", "preemptible_default", "always_preemptible", "allowed"],
}
CHOICES_SCHEMA = {
    "type": "object",
    "description": "Each kind of state -> its values with label and colour; priority_class -> the priority classes.",
    "properties": {"priority_class": {"type": "array", "items": _PRIORITY_CLASS}},
    "additionalProperties": {"type": "array", "items": _LEGEND_ITEM},
}


class ChoicesView(APIView):
    """Every state with its label and colour (the legend), and the priority classes a job may name."""

    @extend_schema(responses={200: OpenApiResponse(response=CHOICES_SCHEMA)})
    def get(self, request):
        return Response({**legends(), "priority_class": priority_class_choices(tenant_of(request.user))})
