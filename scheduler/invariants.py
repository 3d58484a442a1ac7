"""The scheduler's invariants as SQL: what must never be found in the database, whatever ran concurrently.

The constraints make double allocation impossible to store; these queries are how a test, the chaos run
(bench/chaos.py) or an operator (`manage.py check_invariants`) checks that it really never happened. Each query
returns the ids (GPUs or jobs) that break its rule. Plain SQL over any DB-API cursor, so a process without Django
(the chaos run's sampler) reads the same definitions.
"""

from __future__ import annotations

from typing import Any

# A GPU held twice: more than a whole GPU's compute shared out, or two whole-GPU allocations.
DOUBLE_HOLD = {
    "share sum over 100 %": """
        SELECT gpu_id FROM scheduler_allocation WHERE active GROUP BY gpu_id HAVING SUM(compute_pct) > 100""",
    "whole GPU held twice": """
        SELECT gpu_id FROM scheduler_allocation WHERE active AND kind = 'whole' GROUP BY gpu_id HAVING COUNT(*) > 1""",
}
# The other breaches: the ledger's sums out of step, a job's status out of step with what it holds.
CONSISTENCY = {
    "ledger differs from allocations": """
        SELECT l.gpu_id FROM scheduler_gpuledger l
        LEFT JOIN (SELECT gpu_id, SUM(compute_pct) AS pct FROM scheduler_allocation WHERE active GROUP BY gpu_id) a
          ON a.gpu_id = l.gpu_id
        WHERE l.compute_pct <> COALESCE(a.pct, 0)""",
    "running job without allocation": """
        SELECT j.id FROM scheduler_job j WHERE j.status = 'running'
        AND NOT EXISTS (SELECT 1 FROM scheduler_allocation a WHERE a.job_id = j.id AND a.active)""",
    "finished job still holding": """
        SELECT DISTINCT a.job_id FROM scheduler_allocation a JOIN scheduler_job j ON j.id = a.job_id
        WHERE a.active AND j.status IN ('completed', 'failed', 'cancelled', 'pending')""",
}
INVARIANTS = {**DOUBLE_HOLD, **CONSISTENCY}


def violations(cursor: Any, queries: dict[str, str] = INVARIANTS) -> dict[str, list[int]]:
    """Rule name -> the ids that break it (an empty list when it holds), read with `cursor`."""
    found: dict[str, list[int]] = {}
    for name, sql in queries.items():
        cursor.execute(sql)
        found[name] = sorted(row[0] for row in cursor.fetchall())
    return found
