"""The API's errors in one shape: DRF's exception handler normalised, Django's 404 page in JSON under /api/, and a
dependency outage answered 503 with Retry-After, API or not (clusterctl/outages.py), never 500."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import exception_handler as drf_exception_handler

from clusterctl import outages


class Unavailable(APIException):
    """503: a dependency (the database, the cache, the broker) is out of reach; the request may be sent again once it
    is back. DRF's exception handler turns `wait` into the Retry-After header."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "unavailable"

    def __init__(self, name: str, wait: int = outages.RETRY_AFTER_S) -> None:
        super().__init__(unavailable_detail(name, wait))
        self.wait = wait


def unavailable_detail(name: str, wait: int) -> str:
    # The cause (a host name, a driver message) goes to the log only: the client learns what to do, not the topology.
    return f"the {name} cannot be reached right now; send the request again in {wait} seconds"


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
    expects a list. Here both become field -> [messages], a bare message going under `non_field_errors`.

    A dependency outage (clusterctl/outages.py), raised by the view or before it (knox's token lookup in the
    authentication), becomes Unavailable: 503 with Retry-After and `{"detail": ...}`, one warning per outage."""
    name = outages.dependency(exc)
    if name is not None:
        request = context.get("request")
        outages.note(exc, f"{_where(request)} and the requests after it answer 503 until it is back")
        if request is not None and not hasattr(request, "_user"):
            # It failed while authenticating: the answer is rendered for nobody, rather than authenticating again
            # (the browsable API's renderer asks for request.user).
            request._not_authenticated()
        exc = Unavailable(name)
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(exc, Unavailable):
        response._has_been_logged = True  # noted above, once per outage: not one "Service Unavailable" per request
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


def _where(request: Any) -> str:
    return f"{request.method} {request.path}" if request is not None else "a request"


class OutageMiddleware:
    """Pages outside the API (the dashboard, the admin, the sign-in forms): a dependency outage raised by the view
    answers 503 with Retry-After, in JSON under /api/ and in plain words elsewhere, instead of a 500."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        name = outages.dependency(exception)
        if name is None:
            return None
        outages.note(exception, f"{_where(request)} and the requests after it answer 503 until it is back")
        wait = outages.RETRY_AFTER_S
        detail = unavailable_detail(name, wait)
        if request.path.startswith("/api/"):
            response: HttpResponse = JsonResponse({"detail": detail}, status=503)
        else:
            response = HttpResponse(
                f"Service unavailable: {detail}.\n", status=503, content_type="text/plain; charset=utf-8"
            )
        response["Retry-After"] = str(wait)
        response._has_been_logged = True  # noted above, once per outage
        return response
