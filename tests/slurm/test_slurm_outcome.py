"""What a Slurm job's state means to clusterctl's lifecycle (issue 17, part 2), on real `scontrol show job -o` and
`squeue` output captured from Debian's Slurm 22.05 on tests/slurm/emu.py (tests/fixtures/SOURCES.md). Pure: no
Django, no Slurm needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.launch.slurm import (
    SlurmJob,
    outcome,
    parse_comment,
    parse_scontrol_job,
    parse_squeue,
    plan_watch,
    transient,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def job(name: str):
    return parse_scontrol_job((FIXTURES / f"scontrol_job_slurm22.05_emu_{name}.out").read_text())


def kind(name: str, *, was_running: bool = False, waiting_s: float = 0.0) -> str:
    return outcome(job(name), was_running=was_running, waiting_s=waiting_s, ack_timeout_s=120).kind


def test_a_running_job_is_running():
    assert kind("running") == "running"


def test_a_completed_job_with_exit_0_completes():
    assert outcome(job("completed"), was_running=True, waiting_s=0, ack_timeout_s=120).exit_code == 0
    assert kind("completed", was_running=True) == "completed"


def test_a_failed_job_fails_with_its_exit_code_3():
    result = outcome(job("failed"), was_running=True, waiting_s=0, ack_timeout_s=120)
    assert (result.kind, result.exit_code, result.reason) == ("failed", 3, "Slurm job 2 ended FAILED (exit 3)")


def test_pending_for_resources_waits_however_long():
    assert kind("pending_resources", waiting_s=10_000) == "wait"


def test_pending_on_a_drained_node_waits_until_the_ack_timeout():
    assert kind("pending_drained", waiting_s=119) == "wait"


def test_pending_on_a_drained_node_past_the_ack_timeout_is_unstartable_with_slurms_reason():
    result = outcome(job("pending_drained"), was_running=False, waiting_s=121, ack_timeout_s=120)
    assert result.kind == "unstartable"
    assert result.reason == "Slurm could not start job 5 within 120 s: ReqNodeNotAvail,_UnavailableNodes:gpu4"


def test_scontrol_requeue_while_completing_is_our_requeue():
    # Right after `scontrol requeue`: COMPLETING, Restarts=1.
    assert job("requeued").restarts == 1
    assert kind("requeued", was_running=True) == "requeue"


def test_pending_again_after_requeue_is_our_requeue_even_if_we_never_saw_it_run():
    assert kind("requeued_later", was_running=False) == "requeue"


def test_pending_in_squeue_after_we_saw_it_running_is_our_requeue():
    (requeued,) = [j for j in parse_squeue((FIXTURES / "squeue_slurm22.05_emu.out").read_text()) if j.slurm_id == 4]
    assert outcome(requeued, was_running=True, waiting_s=0, ack_timeout_s=120).kind == "requeue"


def test_a_job_cancelled_behind_our_back_fails():
    assert kind("cancelled", was_running=True) == "failed"


@pytest.mark.parametrize(
    ("sid", "state", "nodes", "key"),
    [(3, "COMPLETED", "gpu4", (3, 1)), (2, "FAILED", "gpu3", (2, 1)), (4, "PENDING", "", (4, 1)),
     (5, "PENDING", "", (5, 1)), (1, "RUNNING", "gpu[1-2]", (1, 1))],
)  # fmt: skip
def test_squeue_lines_give_state_nodes_and_our_job_and_generation(sid, state, nodes, key):
    found = {j.slurm_id: j for j in parse_squeue((FIXTURES / "squeue_slurm22.05_emu.out").read_text())}
    assert (found[sid].state, found[sid].nodes) == (state, nodes)
    assert parse_comment(found[sid].comment, "cctest") == key
    assert parse_comment(found[sid].comment, "other") is None


def _j(sid: int, state: str = "RUNNING", key=(7, 2)) -> tuple[tuple[int, int], SlurmJob]:
    return key, SlurmJob(sid, f"cc-{key[0]}-g{key[1]}", f"clusterctl:cctest:{key[0]}:{key[1]}", state, "gpu1")


def test_a_recorded_submit_is_watched_and_nothing_cancelled():
    plan = plan_watch([_j(40)], {(7, 2): 40})
    assert (list(plan.watch), plan.adopt, plan.cancel, plan.missing) == ([(7, 2)], [], [], [])


def test_a_submit_whose_answer_was_lost_is_adopted():
    plan = plan_watch([_j(40)], {(7, 2): None})
    assert (plan.watch[(7, 2)].slurm_id, plan.adopt, plan.cancel) == (40, [(7, 2)], [])


def test_a_second_submit_of_one_generation_is_cancelled_and_the_recorded_one_kept():
    plan = plan_watch([_j(40), _j(41)], {(7, 2): 41})
    assert (plan.watch[(7, 2)].slurm_id, plan.cancel) == (41, [40])


def test_with_nothing_recorded_the_first_of_two_submits_is_adopted_and_the_second_cancelled():
    plan = plan_watch([_j(41), _j(40)], {(7, 2): None})
    assert (plan.watch[(7, 2)].slurm_id, plan.adopt, plan.cancel) == (40, [(7, 2)], [41])


def test_a_live_slurm_job_of_a_generation_that_is_not_current_is_cancelled():
    plan = plan_watch([_j(40, key=(7, 1)), _j(39, "COMPLETED", key=(7, 1))], {(7, 2): None})
    assert (plan.watch, plan.cancel, plan.missing) == ({}, [40], [])


def test_a_recorded_job_slurm_no_longer_lists_is_missing():
    plan = plan_watch([], {(7, 2): 40, (8, 1): None})
    assert (plan.watch, plan.missing) == ({}, [(7, 2)])


def test_an_ended_recorded_job_is_still_watched_so_its_exit_is_read():
    plan = plan_watch([_j(40, "FAILED")], {(7, 2): 40})
    assert (plan.watch[(7, 2)].state, plan.cancel) == ("FAILED", [])


def test_when_the_recorded_job_is_gone_another_live_one_is_cancelled_not_adopted():
    plan = plan_watch([_j(41)], {(7, 2): 40})
    assert (plan.watch, plan.cancel, plan.missing) == ({}, [41], [(7, 2)])


def test_sbatch_without_its_controller_is_transient():
    assert transient((FIXTURES / "sbatch_slurm22.05_emu_no_controller.err").read_text())


def test_squeue_without_its_controller_is_transient():
    assert transient((FIXTURES / "squeue_slurm22.05_emu_no_controller.err").read_text())


def test_sbatch_refusing_an_unknown_node_is_a_refusal_not_transient():
    assert not transient((FIXTURES / "sbatch_slurm22.05_emu_invalid_node.err").read_text())
