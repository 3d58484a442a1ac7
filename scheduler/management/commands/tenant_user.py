"""python manage.py tenant_user --tenant acme --user alice [--quota POOL_ID:GUARANTEED:BORROW] [--max-priority high]
                                [--password | --password-stdin] [--token-days DAYS] [--no-token]

Creates the tenant and the user if needed, puts the user in the tenant, sets the quotas, and issues the user a new
API token, printed once (only its digest is stored; earlier tokens stay valid until they expire or are revoked:
`manage.py api_tokens`). With --password (asked twice on the terminal) or --password-stdin (the first line of
standard input) the user can also sign in to the pages (`/accounts/login/`, then `/my/`); without, a new user has
no usable password and an existing one keeps theirs. A password is never taken from the command line.

Everything is checked before anything is written, and written in one transaction. In embedded mode the tasks the
changes send (a scheduling round, a live-view update) are left to the demo's process (clusterctl.celery.
tasks_left_to_the_server): its periodic round takes up the new quota within ROUND_INTERVAL_S.
"""

import getpass
import sys

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from clusterctl import tokens
from clusterctl.celery import tasks_left_to_the_server
from scheduler import actions
from scheduler.models import Pool, PriorityClass


class Command(BaseCommand):
    help = (
        "Create (or update) a tenant and a member user, issue the user a new API token; optionally set quotas and a "
        "password for the pages."
    )
    # The system checks import every URL module (about 0.8 s); the command needs none of them.
    requires_system_checks = []
    stealth_options = ("stdin",)

    def add_arguments(self, parser):
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--user", required=True)
        parser.add_argument("--max-priority", default=None, help="highest priority class its jobs may use")
        parser.add_argument(
            "--quota", action="append", default=[], help="POOL_ID:GUARANTEED:BORROW (repeatable)", metavar="Q"
        )
        password = parser.add_mutually_exclusive_group()
        password.add_argument(
            "--password", action="store_true", help="ask for a password for the pages (/my/), twice, on the terminal"
        )
        password.add_argument(
            "--password-stdin", action="store_true", help="read the password from the first line of standard input"
        )
        parser.add_argument(
            "--token-days", type=float, default=None, help="days until the new token expires (API_TOKEN_TTL_DAYS)"
        )
        parser.add_argument("--no-token", action="store_true", help="issue no token")

    def handle(self, **o):
        try:
            tokens.lifetime(o["token_days"])
        except tokens.TokenError as exc:
            raise CommandError(f"--token-days {exc}") from exc
        if o["max_priority"] and not PriorityClass.objects.filter(name=o["max_priority"]).exists():
            known = ", ".join(PriorityClass.objects.values_list("name", flat=True))
            raise CommandError(f"no priority class {o['max_priority']!r} (known: {known})")
        quotas = [self._quota(spec) for spec in o["quota"]]
        User = get_user_model()
        user = User.objects.filter(username=o["user"]).first()
        password = self._password(o, user or User(username=o["user"]))

        with tasks_left_to_the_server(), transaction.atomic():
            tenant = actions.create_tenant(o["tenant"], max_priority=o["max_priority"])
            if user is None:
                user = User(username=o["user"])
                if password is None:
                    user.set_unusable_password()  # API tokens only, until a password is set
            if password is not None:
                user.set_password(password)
            user.save()
            try:
                actions.add_member(tenant, user)
            except actions.ActionError as exc:
                raise CommandError(str(exc)) from exc
            for pool, guaranteed, borrow in quotas:
                try:
                    actions.set_quota(tenant, pool, guaranteed_gpus=guaranteed, borrow_limit=borrow)
                except actions.ActionError as exc:
                    raise CommandError(f"--quota {pool.pk}:{guaranteed}:{borrow}: {exc}") from exc
            token = None if o["no_token"] else tokens.issue_token(user, o["token_days"])

        self.stdout.write(f"tenant {tenant.name}, user {user.username}")
        if password is not None:
            self.stdout.write("  password set: sign in at /accounts/login/, the tenant's page is /my/")
        if token is not None:
            self.stdout.write(f"token {token[1]}")
            expiry = token[0].expiry
            self.stdout.write(f"  expires {expiry:%Y-%m-%d %H:%M} UTC; shown only now, it cannot be shown again")

    @staticmethod
    def _quota(spec: str) -> tuple[Pool, int, int]:
        try:
            pool_id, guaranteed, borrow = (int(x) for x in spec.split(":"))
            return Pool.objects.get(pk=pool_id), guaranteed, borrow
        except (ValueError, Pool.DoesNotExist) as exc:
            known = ", ".join(f"{p.pk} ({p.cluster.name}/{p.name})" for p in Pool.objects.select_related("cluster"))
            raise CommandError(
                f"--quota {spec!r}: expected POOL_ID:GUARANTEED:BORROW with a known pool (pools: {known or 'none'})"
            ) from exc

    def _password(self, o, user) -> str | None:
        """The password asked for, checked by the site's password validators; None if none was asked for."""
        stdin = o.get("stdin") or sys.stdin
        if o["password_stdin"]:
            password = stdin.readline().rstrip("\r\n")
            if not password:
                raise CommandError("--password-stdin: standard input held no password (one line expected)")
        elif o["password"]:
            if not stdin.isatty():
                raise CommandError("--password asks on a terminal; give it on standard input with --password-stdin")
            password = getpass.getpass(f"password for {user.username}: ")
            if password != getpass.getpass("again: "):
                raise CommandError("--password: the two passwords differ; nothing was changed")
        else:
            return None
        try:
            validate_password(password, user)
        except ValidationError as exc:
            raise CommandError(f"password refused: {' '.join(exc.messages)}") from exc
        return password
