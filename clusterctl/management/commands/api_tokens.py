"""python manage.py api_tokens list|issue|revoke --user alice [--days D] [--prefix P | --all]

API tokens of one user (clusterctl/tokens.py): `list` shows each token's first characters, creation and expiry (never
a secret: none is stored); `issue` prints a new one, once; `revoke` deletes the one whose first characters are given
(`--prefix`, 8 at least), or `--all` of them. A revoked token is refused (401) from the next request on.
"""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from knox.models import AuthToken

from clusterctl import tokens


class Command(BaseCommand):
    help = "List, issue or revoke a user's API tokens."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["list", "issue", "revoke"])
        parser.add_argument("--user", required=True)
        parser.add_argument(
            "--days", type=float, default=None, help="issue: days until it expires (API_TOKEN_TTL_DAYS)"
        )
        which = parser.add_mutually_exclusive_group()
        which.add_argument("--prefix", help="revoke: the token's first characters, as `list` shows them")
        which.add_argument("--all", action="store_true", help="revoke: every token of the user")

    def handle(self, **o):
        try:
            user = get_user_model().objects.get_by_natural_key(o["user"])
        except get_user_model().DoesNotExist:
            raise CommandError(f"no user {o['user']!r}") from None
        try:
            getattr(self, f"_{o['action']}")(user, o)
        except tokens.TokenError as exc:
            raise CommandError(str(exc)) from exc

    def _list(self, user, o) -> None:
        now = timezone.now()
        rows = AuthToken.objects.filter(user=user).order_by("-created")
        for t in rows:
            state = "expired" if t.expiry is not None and t.expiry <= now else "valid"
            expiry = f"{t.expiry:%Y-%m-%d %H:%M}" if t.expiry else "never"
            self.stdout.write(f"{t.token_key}...  created {t.created:%Y-%m-%d %H:%M}  expires {expiry}  {state}")
        if not rows:
            self.stdout.write(f"{user.get_username()} has no API tokens")

    def _issue(self, user, o) -> None:
        token, secret = tokens.issue_token(user, o["days"])
        self.stdout.write(f"token {secret}")
        self.stdout.write(f"  expires {token.expiry:%Y-%m-%d %H:%M} UTC; shown only now, it cannot be shown again")

    def _revoke(self, user, o) -> None:
        if not o["prefix"] and not o["all"]:
            raise CommandError("revoke needs --prefix (one token, as `list` shows it) or --all")
        count = tokens.revoke_tokens(user, o["prefix"] if not o["all"] else None)
        self.stdout.write(f"revoked {count} token(s) of {user.get_username()}")
