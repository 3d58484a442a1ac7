"""Request rates: DRF throttles for the API, a stricter rate of failed sign-ins per client address.

The API (REST_FRAMEWORK's DEFAULT_THROTTLE_CLASSES) counts requests per user (`user`) and, for the few paths open
without a login, per client address (`anon`). Password sign-ins (the dashboard's /accounts/login/, the admin's
/admin/login/ and the browsable API's /api/v1/auth/login/) have two guards: django-axes locks a username out from
an address after LOGIN_FAILURE_LIMIT wrong passwords, and `FailedLoginThrottle` refuses every sign-in from an
address that failed more than the `login` rate, whichever usernames it tried (password spraying). Rates come from
settings (DEFAULT_THROTTLE_RATES), read when a request is judged, and the counts live in the default cache: Redis in
production, so every web process shares them.

The client address is the one DRF's throttles use (`client_ip`): REMOTE_ADDR, or the entry of X-Forwarded-For that
the trusted proxy added (REST_FRAMEWORK's NUM_PROXIES); axes reads the same (AXES_CLIENT_IP_CALLABLE).
"""

from __future__ import annotations

import math

from django.conf import settings
from django.contrib.auth.signals import user_login_failed
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from rest_framework import throttling
from rest_framework.settings import api_settings


def client_ip(request: HttpRequest) -> str | None:
    """The client's address as the throttles and the login lockout see it (see the module)."""
    return throttling.BaseThrottle().get_ident(request)


class _RatesFromSettings:
    """DRF binds THROTTLE_RATES when its module is imported; read them per request, so settings changes apply."""

    scope: str

    def get_rate(self) -> str | None:
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)


class AnonRateThrottle(_RatesFromSettings, throttling.AnonRateThrottle):
    pass


class UserRateThrottle(_RatesFromSettings, throttling.UserRateThrottle):
    pass


class FailedLoginThrottle(_RatesFromSettings, throttling.SimpleRateThrottle):
    """Failed sign-ins per client address, at most the `login` rate; only failures count."""

    scope = "login"

    def get_cache_key(self, request, view) -> str:
        return self.cache_format % {"scope": self.scope, "ident": client_ip(request)}

    def _load(self, request: HttpRequest) -> None:
        self.key = self.get_cache_key(request, None)
        self.now = self.timer()
        self.history = [t for t in self.cache.get(self.key, []) if t > self.now - self.duration]

    def retry_after(self, request: HttpRequest) -> int | None:
        """Seconds until this address may try again, or None when it is under the rate."""
        if self.rate is None:
            return None
        self._load(request)
        if len(self.history) < self.num_requests:
            return None
        return max(1, math.ceil(self.history[self.num_requests - 1] + self.duration - self.now))

    def record_failure(self, request: HttpRequest) -> None:
        if self.rate is None:
            return
        self._load(request)
        self.history.insert(0, self.now)
        self.cache.set(self.key, self.history[: self.num_requests], self.duration)


@receiver(user_login_failed, dispatch_uid="clusterctl.throttles.count_failed_login")
def count_failed_login(sender, credentials, request=None, **kwargs) -> None:
    """Every failed authenticate() with a request (all three sign-in forms) counts against the address."""
    if request is not None:
        FailedLoginThrottle().record_failure(request)


class LoginRateLimitMiddleware:
    """Refuse a sign-in POST with 429 while its address is over the `login` rate (settings.LOGIN_THROTTLED_VIEWS)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view_func, view_args, view_kwargs) -> HttpResponse | None:
        match = request.resolver_match
        if request.method != "POST" or match is None or match.view_name not in settings.LOGIN_THROTTLED_VIEWS:
            return None
        wait = FailedLoginThrottle().retry_after(request)
        if wait is None:
            return None
        # Plain text, as axes answers a locked-out username: these are HTML forms, not API endpoints.
        response = HttpResponse(
            f"Too many failed sign-ins from this address; try again in {wait} seconds.\n",
            status=429,
            content_type="text/plain; charset=utf-8",
        )
        response["Retry-After"] = str(wait)
        return response
