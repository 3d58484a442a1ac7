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

When the cache cannot be reached (Redis restarting), every throttle here fails open: the request is let through
uncounted, and one warning says so when the outage begins (clusterctl/outages.py). Rate limiting guards against
abuse; it must not turn a Redis blip into a total API outage. For CACHE_RETRY_S after a failure the cache is not
asked again, so a Redis that hangs instead of refusing costs one socket timeout per process per CACHE_RETRY_S,
not one per request. Meanwhile the failed-sign-in count per address is not kept either; axes's lockout per
username and address is, since it lives in the database. Each check let through that way counts in
`clusterctl_unthrottled_requests_total{scope}` (this process's /metrics, beside django-prometheus's request metrics).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.contrib.auth.signals import user_login_failed
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from prometheus_client import Counter
from rest_framework import throttling
from rest_framework.settings import api_settings

from clusterctl import outages

log = logging.getLogger(__name__)

CACHE_RETRY_S = 2.0
T = TypeVar("T")
UNTHROTTLED = Counter(
    "clusterctl_unthrottled_requests",
    "Rate checks let through uncounted because the cache could not be reached, by throttle scope",
    ["scope"],
)


def client_ip(request: HttpRequest) -> str | None:
    """The client's address as the throttles and the login lockout see it (see the module)."""
    return throttling.BaseThrottle().get_ident(request)


class _CacheState:
    """Whether the throttles' cache is out of reach in this process (see the module), shared by every throttle."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.down_until = 0.0  # time.monotonic() before which the cache is not asked
        self.down = False

    def skip(self) -> bool:
        return time.monotonic() < self.down_until

    def failed(self, exc: BaseException) -> None:
        with self._lock:
            self.down_until = time.monotonic() + CACHE_RETRY_S
            self.down = True
        outages.note(exc, "request rates are not limited (the throttles let every request through) until it is back",
                     key="throttles")  # fmt: skip

    def worked(self) -> None:
        if not self.down:  # the usual case, without the lock
            return
        with self._lock:
            was, self.down = self.down, False
        if was:
            log.info("the cache is reachable again: request rates are limited again")


cache_state = _CacheState()


def _fail_open(scope: str, call: Callable[[], T], default: T) -> T:
    """`call()`, or `default` when the cache is (or was just found) out of reach."""
    if not cache_state.skip():
        try:
            result = call()
        except outages.REDIS_ERRORS as exc:
            cache_state.failed(exc)
        else:
            cache_state.worked()
            return result
    UNTHROTTLED.labels(scope=scope).inc()
    return default


class _RatesFromSettings:
    """DRF binds THROTTLE_RATES when its module is imported; read them per request, so settings changes apply."""

    scope: str

    def get_rate(self) -> str | None:
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def allow_request(self, request, view) -> bool:
        if self.rate is None or self.get_cache_key(request, view) is None:
            return True  # this rate does not apply to the request (the anonymous one to a signed-in user)
        return _fail_open(self.scope, lambda: super(_RatesFromSettings, self).allow_request(request, view), True)


class AnonRateThrottle(_RatesFromSettings, throttling.AnonRateThrottle):
    pass


class UserRateThrottle(_RatesFromSettings, throttling.UserRateThrottle):
    pass


class FailedLoginThrottle(_RatesFromSettings, throttling.SimpleRateThrottle):
    """Failed sign-ins per client address, at most the `login` rate; only failures count. Fails open (the module)."""

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
        return _fail_open(self.scope, lambda: self._retry_after(request), None)

    def _retry_after(self, request: HttpRequest) -> int | None:
        self._load(request)
        if len(self.history) < self.num_requests:
            return None
        return max(1, math.ceil(self.history[self.num_requests - 1] + self.duration - self.now))

    def record_failure(self, request: HttpRequest) -> None:
        if self.rate is None:
            return
        _fail_open(self.scope, lambda: self._record(request), None)

    def _record(self, request: HttpRequest) -> None:
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
