"""The API's errors in one shape: DRF's exception handler normalised, and Django's 404 page in JSON under /api/."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import exception_handler as drf_exception_handler


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler404: a path no route matches. Under /api/ (an id with a dot in it, a typo in the path) the answer
    is the API's `{"detail": ...}` in JSON, as a 404 from a view is; elsewhere Django's page."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return defaults.page_not_found(request, exception)


def exception_handler(exc: Exception, context: dict) -> Response | None:
    """REST_FRAMEWORK["EXCEPTION_HANDLER"]: DRF's, with every 400 in one shape (clusterctl/openapi.py).

    A serializer's errors already map each field to a list of messages; a ValidationError raised by a view
    (`{"pool": "..."}`, or a bare message) is not normalised by DRF, so a client would meet a string where it
    expects a list. Here both become field -> [messages], a bare message going under `non_field_errors`."""
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(exc, ValidationError):
        response.data = _field_errors(response.data)
    return response


def _field_errors(data: Any) -> dict[str, Any]:
    if isinstance(data, dict):
        return {str(key): _messages(value) for key, value in data.items()}
    return {api_settings.NON_FIELD_ERRORS_KEY: _messages(data)}


def _messages(value: Any) -> list | dict:
    if isinstance(value, dict):
        return _field_errors(value)
    if isinstance(value, list | tuple):
        return [item if isinstance(item, str) else _field_errors(item) if isinstance(item, dict) else str(item)
                for item in value]  # fmt: skip
    return [value]
