"""API tokens in the admin: issue (the secret is shown once), list by prefix, owner and expiry, revoke.

Replaces knox's own registration, whose list shows the digest and whose add form allows a token that never expires.
"""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.utils import timezone
from knox.models import AuthToken

from clusterctl import tokens
from clusterctl.models import ApiToken

admin.site.unregister(AuthToken)


class IssueTokenForm(forms.ModelForm):
    days = forms.FloatField(
        min_value=0.01,
        max_value=settings.API_TOKEN_MAX_TTL_DAYS,
        initial=settings.API_TOKEN_TTL_DAYS,
        help_text="Days until the token expires.",
    )

    class Meta:
        model = ApiToken
        fields = ["user"]


@admin.register(ApiToken)
class AuthTokenAdmin(admin.ModelAdmin):
    list_display = ["token_key", "user", "created", "expiry", "expired"]
    list_filter = ["expiry"]
    search_fields = ["token_key", "user__username"]
    ordering = ["-created"]
    raw_id_fields = ["user"]
    actions = ["revoke"]

    @admin.display(boolean=True)
    def expired(self, obj: ApiToken) -> bool:
        return obj.expiry is not None and obj.expiry <= timezone.now()

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = IssueTokenForm
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request, obj=None):
        return ["user", "days"] if obj is None else ["token_key", "user", "created", "expiry"]

    def get_readonly_fields(self, request, obj=None):
        return [] if obj is None else ["token_key", "user", "created", "expiry"]

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # a token is issued or revoked, never edited

    def save_model(self, request, obj, form, change) -> None:
        token, secret = tokens.issue_token(form.cleaned_data["user"], form.cleaned_data["days"])
        # The admin logs and links the object it was handed: make it the row that was issued.
        obj.digest, obj.token_key, obj.created, obj.expiry = token.digest, token.token_key, token.created, token.expiry
        obj._state.adding, obj._state.db = False, token._state.db
        self.message_user(
            request,
            f"Token for {token.user}: {secret} - copy it now, it is not stored and cannot be shown again "
            f"(expires {token.expiry:%Y-%m-%d %H:%M} UTC).",
            messages.WARNING,
        )

    @admin.action(description="Revoke the selected tokens", permissions=["delete"])
    def revoke(self, request, queryset) -> None:
        self.message_user(request, f"{tokens.revoke(queryset)} token(s) revoked.", messages.SUCCESS)
