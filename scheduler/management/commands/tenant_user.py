"""python manage.py tenant_user --tenant acme --user alice [--quota POOL_ID:GUARANTEED:BORROW] [--max-priority high]

Creates the tenant and the user if needed, puts the user in the tenant, and prints the user's API token.
"""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from rest_framework.authtoken.models import Token

from scheduler import actions
from scheduler.models import Pool, PriorityClass


class Command(BaseCommand):
    help = "Create (or update) a tenant, a member user and its API token; optionally set quotas."

    def add_arguments(self, parser):
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--user", required=True)
        parser.add_argument("--max-priority", default=None, help="highest priority class its jobs may use")
        parser.add_argument(
            "--quota", action="append", default=[], help="POOL_ID:GUARANTEED:BORROW (repeatable)", metavar="Q"
        )

    def handle(self, **o):
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
        token, _ = Token.objects.get_or_create(user=user)
        self.stdout.write(f"tenant {tenant.name}, user {user.username}\ntoken {token.key}")
