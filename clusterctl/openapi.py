"""The API's error contract in its OpenAPI schema: one body shape per kind of error, declared on every operation.

DRF answers every error in one of two shapes, and the schema says so:

- `ValidationError` (400): field name -> list of messages (a nested field: its own field -> messages object);
  `non_field_errors` for what concerns the request as a whole; `detail` alone for a body that does not parse.
- `Error` (401, 403, 404, 409, 413, 415, 422, 429, 503): `{"detail": "..."}`.

A postprocessing hook (SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]) adds, on every operation, the answers any
request can get before or around its view: 401 (no or a bad token), 403 (not allowed, or a session without its
CSRF token), 413 (a body over the limit, refused before it is read), 429 (throttled), 503 (the database aborted
the transaction for a deadlock more times than the bounded retry allows, or a dependency is out of reach:
clusterctl/errors.py); plus 404 where the path names an object, 400 where the request carries input (a body or
query parameters) and 415 where it has a body. What only some views answer, such as 409 for a state conflict, each
view declares itself with `error_response`.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse

ERROR = "Error"
VALIDATION_ERROR = "ValidationError"
_METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
_RETRY_AFTER = {
    "Retry-After": {
        "schema": {"type": "integer", "minimum": 0},
        "description": "Seconds to wait before trying again.",
    }
}

_MESSAGES = {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "object"}]}}
SCHEMAS: dict[str, dict[str, Any]] = {
    ERROR: {
        "type": "object",
        "description": "What went wrong, in words.",
        "properties": {"detail": {"type": "string"}},
        "required": ["detail"],
    },
    VALIDATION_ERROR: {
        "type": "object",
        "description": (
            "Each field in error, with its messages (a nested field maps its own fields to messages); "
            "`non_field_errors` for the request as a whole; `detail` alone when the body could not be parsed."
        ),
        "properties": {
            "detail": {"type": "string"},
            "non_field_errors": {"type": "array", "items": {"type": "string"}},
        },
        "additionalProperties": {"anyOf": [_MESSAGES, {"type": "object"}]},
        "example": {"gpus": ["Ensure this value is greater than or equal to 1."]},
    },
}

# Answers that any operation may give, whatever its view does.
ALWAYS = {
    401: "Not authenticated: no credentials, or a token that is unknown, expired or revoked.",
    403: "Authenticated, but not allowed (operators only, or a session request without its CSRF token).",
    413: "The request body is over the size limit; it was refused before it was read.",
    429: "Too many requests: throttled; `Retry-After` says when to try again.",
    503: (
        "Try again after `Retry-After` seconds: the database kept aborting the transaction for a deadlock (nothing was "
        "changed), or the database, the cache or the message broker is out of reach for a moment."
    ),
}
NOT_FOUND = "No such object, or not one of yours."
# Django's forms and DRF's fields refuse NUL in text (ProhibitNullCharactersValidator): a query's text says so.
NO_NUL = "^[^\\u0000]*$"
BAD_REQUEST = "The input is invalid; each field in error names its problem."
UNSUPPORTED_MEDIA = "The body's Content-Type is none this operation reads (or a multipart body that does not parse)."


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def error_response(description: str) -> OpenApiResponse:
    """An `{"detail": ...}` answer for one view's extend_schema, e.g. `409: error_response("why")`."""
    return OpenApiResponse(response=_ref(ERROR), description=description)


def field_errors_response(
    description: str, fields: list[str], *, nested: tuple[str, ...] = (), example: dict | None = None
) -> OpenApiResponse:
    """A 400 whose body names only `fields` (each -> list of messages; a `nested` one -> a list, or its own keys ->
    lists), `non_field_errors` for the request as a whole and `detail` alone for a body that does not parse: for a
    view's extend_schema, `400: field_errors_response(...)`. The shape is ValidationError's, with its keys listed."""
    strings = {"type": "array", "items": {"type": "string"}}
    keyed = {"type": "object", "additionalProperties": strings}
    properties: dict[str, Any] = {name: dict(strings) for name in fields}
    properties.update({name: {"anyOf": [dict(strings), dict(keyed)]} for name in nested})
    properties["non_field_errors"] = dict(strings)
    properties["detail"] = {"type": "string"}
    schema = {
        "type": "object",
        "description": (
            "Each field in error with its list of messages (always a list, one shape for every refusal); "
            "`non_field_errors` for the request as a whole; `detail` alone when the body could not be parsed."
        ),
        "properties": properties,
        "additionalProperties": False,
    }
    if example is not None:
        schema["example"] = example
    return OpenApiResponse(response=schema, description=description)


def _response(code: int, description: str) -> dict[str, Any]:
    body = {"description": description, "content": {"application/json": {"schema": _ref(
        VALIDATION_ERROR if code == 400 else ERROR
    )}}}  # fmt: skip
    if code in (429, 503):
        body["headers"] = dict(_RETRY_AFTER)
    return body


def _no_nul(schema: dict) -> None:
    target = schema.get("items", schema) if schema.get("type") == "array" else schema
    if target.get("type") == "string" and not {"enum", "format", "pattern"} & set(target):
        target["pattern"] = NO_NUL


def declare_error_responses(result: dict, generator: Any, request: Any, public: bool) -> dict:
    """drf-spectacular postprocessing hook: every operation declares the errors it can answer."""
    result.setdefault("components", {}).setdefault("schemas", {}).update(SCHEMAS)
    for item in result.get("paths", {}).values():
        for method, operation in item.items():
            if method not in _METHODS:
                continue
            parameters = operation.get("parameters", [])
            for parameter in parameters:
                if parameter.get("in") == "query":
                    _no_nul(parameter.get("schema", {}))
            wanted = dict(ALWAYS)
            if any(p.get("in") == "path" for p in parameters):
                wanted[404] = NOT_FOUND
            if "requestBody" in operation or any(p.get("in") == "query" for p in parameters):
                wanted[400] = BAD_REQUEST
            if "requestBody" in operation:
                wanted[415] = UNSUPPORTED_MEDIA
            responses = operation.setdefault("responses", {})
            for code, description in wanted.items():
                declared = responses.get(str(code))
                if declared is None:
                    responses[str(code)] = _response(code, description)
                elif "content" not in declared:  # declared by a view without a body: the body is the standard one
                    declared["content"] = _response(code, description)["content"]
            operation["responses"] = dict(sorted(responses.items()))
    return result
