"""python manage.py check_invariants: say whether any GPU is held twice or any job is out of step with its GPUs."""

from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from scheduler.invariants import violations


class Command(BaseCommand):
    help = "Check the scheduler's invariants: no GPU held twice, ledger = allocations, jobs hold what they should."

    def handle(self, **options):
        with connection.cursor() as cursor:
            found = violations(cursor)
        broken = {name: ids for name, ids in found.items() if ids}
        for name, ids in found.items():
            shown = ", ".join(map(str, ids[:20])) + (" ..." if len(ids) > 20 else "")
            self.stdout.write(f"{'FAIL' if ids else 'ok  '}  {name}" + (f": {len(ids)} ({shown})" if ids else ""))
        if broken:
            raise CommandError(f"{len(broken)} of {len(found)} invariants broken")
