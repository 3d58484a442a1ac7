"""python manage.py tenant_user --tenant acme --user alice [--quota POOL_ID:GUARANTEED:BORROW] [--max-priority high]
                                [--token-days DAYS] [--no-token]

Creates the tenant and the user if needed, puts the user in the tenant, and issues the user a new API token, printed
once (only its digest is stored; earlier tokens stay valid until they expire or are revoked: `manage.py api_tokens`).
"""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from clusterctl import tokens
from scheduler import actions
from scheduler.models import Pool, PriorityClass


class Command(BaseCommand):
    help = "Create (or update) a tenant and a member user, issue the user a new API token; optionally set quotas."

    def add_arguments(self, parser):
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--user", required=True)
        parser.add_argument("--max-priority", default=None, help="highest priority class its jobs may use")
        parser.add_argument(
            "--quota", action="append", default=[], help="POOL_ID:GUARANTEED:BORROW (repeatable)", metavar="Q"
        )
        parser.add_argument(
            "--token-days", type=float, default=None, help="days until the new token expires (API_TOKEN_TTL_DAYS)"
        )
        parser.add_argument("--no-token", action="store_true", help="issue no token")

    def handle(self, **o):
        try:
            tokens.lifetime(o["token_days"])  # refused before anything is created
        except tokens.TokenError as exc:
            raise CommandError(f"--token-days {exc}") from exc
        if o["max_priority"] and not PriorityClass.objects.filter(name=o["max_priority"]).exists():
            known = ", ".join(PriorityClass.objects.values_list("name", flat=True))
            raise CommandError(f"no priority class {o['max_priority']!r} (known: {known})")
        tenant = actions.create_tenant(o["tenant"], max_priority=o["max_priority"])
        user, created = get_user_model().objects.get_or_create(username=o["user"])
        if created:
            user.set_unusable_password()  # API tokens only; an operator can set a password in the admin
            user.save()
        try:
            actions.add_member(tenant, user)
        except actions.ActionError as exc:
            raise CommandError(str(exc)) from exc
        for spec in o["quota"]:
            try:
                pool_id, guaranteed, borrow = (int(x) for x in spec.split(":"))
                pool = Pool.objects.get(pk=pool_id)
            except (ValueError, Pool.DoesNotExist) as exc:
                raise CommandError(f"--quota {spec!r}: expected POOL_ID:GUARANTEED:BORROW with a known pool") from exc
            actions.set_quota(tenant, pool, guaranteed_gpus=guaranteed, borrow_limit=borrow)
        self.stdout.write(f"tenant {tenant.name}, user {user.username}")
        if not o["no_token"]:
            token, secret = tokens.issue_token(user, o["token_days"])
            self.stdout.write(f"token {secret}")
            self.stdout.write(f"  expires {token.expiry:%Y-%m-%d %H:%M} UTC; shown only now, it cannot be shown again")
