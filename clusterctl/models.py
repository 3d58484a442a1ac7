"""The project's own models: the API token as operators see it (django-rest-knox's row, named by its prefix)."""

from __future__ import annotations

from knox.models import AuthToken


class ApiToken(AuthToken):
    """knox's AuthToken, shown by its first characters: its default name is the digest."""

    class Meta:
        proxy = True
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.token_key}... ({self.user})"
