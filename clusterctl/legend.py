"""Every state of every app with its label and colour: one legend for admin, API, pages and heat maps."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from fabric.choices import ALL_CHOICES as FABRIC
from scheduler.choices import ALL_CHOICES as SCHEDULER


def legends() -> dict[str, list[dict[str, str]]]:
    return {name: choices.legend() for name, choices in {**FABRIC, **SCHEDULER}.items()}


class ChoicesView(APIView):
    @extend_schema(responses={200: dict})
    def get(self, request):
        return Response(legends())
