"""API tokens (django-rest-knox): issued, listed and revoked here, by `manage.py tenant_user`, `manage.py api_tokens`,
the demo and the admin.

Only a SHA-512 digest of each token is stored, with its first characters (`token_key`, for lookup and for people to
tell tokens apart) and an expiry; the secret is shown once, when it is issued, and can never be shown again. A user
may hold several (one per script or machine); revoking deletes the row, and the next request with it is a 401.
Lifetime: API_TOKEN_TTL_DAYS by default, at most API_TOKEN_MAX_TTL_DAYS.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from knox.models import AuthToken


class TokenError(ValueError):
    """A token request that cannot be honoured (a bad lifetime, an unknown prefix)."""


def lifetime(days: float | None) -> timedelta:
    """A token's lifetime of `days` (None: API_TOKEN_TTL_DAYS); more than 0, at most API_TOKEN_MAX_TTL_DAYS."""
    days = settings.API_TOKEN_TTL_DAYS if days is None else days
    if not 0 < days <= settings.API_TOKEN_MAX_TTL_DAYS:
        raise TokenError(
            f"{days:g} days: a token's lifetime is more than 0 and at most {settings.API_TOKEN_MAX_TTL_DAYS:g} days"
        )
    return timedelta(days=days)


def issue_token(user, days: float | None = None) -> tuple[AuthToken, str]:
    """A new token for `user`, valid `days` (see `lifetime`): the row and the secret, which is shown once."""
    return AuthToken.objects.create(user=user, expiry=lifetime(days))


def revoke(tokens: QuerySet[AuthToken]) -> int:
    """Revoke these tokens (the admin's action): how many were revoked."""
    count, _ = tokens.delete()
    return count


@transaction.atomic
def revoke_tokens(user, prefix: str | None = None) -> int:
    """Revoke the user's token that starts with `prefix` (as listed), or all of them; how many were revoked."""
    tokens = AuthToken.objects.filter(user=user)
    if prefix is not None:
        if len(prefix) < 8:
            raise TokenError(f"prefix {prefix!r}: give at least 8 characters of the token, as `api_tokens list` shows")
        tokens = tokens.filter(token_key__startswith=prefix)
        if not tokens.exists():
            raise TokenError(f"{user.get_username()} has no token starting with {prefix!r}")
    return revoke(tokens)
