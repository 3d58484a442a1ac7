"""Node liveness judged against the control plane's own progress (pure).

The evidence is the poll. Each round of polls was sent to a known set of nodes at a known time, and ingest
records, per node, the newest round it answered. A round speaks about a node only when all of these hold:

- it was sent to that node (a poll that beat never sent, or that expired on the broker before an agent took it, is
  nobody's miss);
- ingest has caught up past the time its answers were due (`answer_s` after sending): an answer that waits in the
  inbox, or a batch that has not run yet, is not a missing answer;
- the other nodes answered it: a round that a large share of the nodes missed at once (`stalled_fraction`) says
  the pipeline is in trouble (broker, the agents' network, ingest), not the nodes.

A node that missed `unreachable_polls` such rounds with no answer since is unreachable (a warning: nothing moves),
after `down_polls` it is down (critical: its capacity leaves until it answers again). One answer, to any later
poll, ends the streak, and a late answer or a late "expired on the broker" report takes back the misses it covers.

When the pipeline itself is behind (no poll sent for `unreachable_polls` intervals, ingest that far behind, or
`unreachable_polls` judged rounds in a row missed by a large share of the nodes), the verdict is one cluster-level
finding, `telemetry_stalled`, that names what is behind and takes no capacity; no node gets a new alert while it
lasts (a node that answers may still clear its own).

The poller's own pace is the other half (`poller_findings`): when its rounds come, on average over the last
`unreachable_polls`, more than `BEHIND_SLACK` intervals apart (beat's polls waited on a busy worker or broker, or a
round took longer to read than the interval), it is behind its schedule. That is one cluster-level finding,
`telemetry_behind`, that says how many nodes were polled lately and at what cadence; node liveness is not judged
while it lasts (the caller skips `judge`), since answers late for the same reason would look like silent nodes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from .health import Finding

UNREACHABLE = "node_unreachable"
DOWN = "node_down"
STALLED = "telemetry_stalled"
BEAT_STALLED = "beat_stalled"
BEHIND = "telemetry_behind"
BEHIND_SLACK = 1.5  # rounds more than this many intervals apart, on average, are the poller's lateness
CLUSTER_KIND = "cluster"
CLUSTER_KEY = "cluster"  # object key of the findings about the cluster as a whole


@dataclass(frozen=True, slots=True)
class Round:
    """One round of polls: when the control plane sent it, and to which nodes (a node whose previous poll still waits
    unanswered in its queue counts as asked: it has a poll it did not take)."""

    at: float
    asked: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Answers:
    """What ingest recorded. `newest`: node -> send time of the newest round it answered; `counts`: round send time ->
    answers to it that were ingested; `expired`: round send time -> nodes whose poll expired on the broker unsent."""

    newest: Mapping[str, float] = field(default_factory=dict)
    counts: Mapping[float, int] = field(default_factory=dict)
    expired: Mapping[float, frozenset[str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Progress:
    """The control plane's own progress at `now`. `ingested_until`: every answer that reached the control plane
    before this time has been ingested (None: nothing known yet); `inbox_backlog`: results waiting for a batch;
    `ingest_running`: a batch holds the ingest lock; `beat_age_s`: seconds since beat's last tick (None: unknown)."""

    now: float
    ingested_until: float | None
    inbox_backlog: int = 0
    ingest_running: bool = False
    beat_age_s: float | None = None


@dataclass(frozen=True, slots=True)
class Rules:
    interval_s: float
    unreachable_polls: int
    down_polls: int
    answer_s: float
    stalled_fraction: float = 0.5

    def __post_init__(self) -> None:
        if self.interval_s <= 0:
            raise ValueError(f"interval_s must be positive, not {self.interval_s!r}")
        if not 0 < self.unreachable_polls <= self.down_polls:
            raise ValueError(
                f"need 0 < unreachable_polls <= down_polls, not {self.unreachable_polls!r} and {self.down_polls!r}"
            )
        if self.answer_s < 0:
            raise ValueError(f"answer_s must not be negative, not {self.answer_s!r}")
        if not 0 < self.stalled_fraction <= 1:
            raise ValueError(f"stalled_fraction must be in (0, 1], not {self.stalled_fraction!r}")

    @property
    def stall_after_s(self) -> float:
        return self.unreachable_polls * self.interval_s


@dataclass(frozen=True, slots=True)
class State:
    """What the judge keeps between two checks. `pending`: rounds sent but not judged yet, oldest first; `judged`:
    (send time, nodes asked) of the newest judged rounds; `misses`: node -> send times of the judged rounds it
    missed, oldest first; `last_sent`: send time of the newest round."""

    pending: tuple[Round, ...] = ()
    judged: tuple[tuple[float, int], ...] = ()
    misses: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    last_sent: float | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    state: State
    nodes: dict[str, list[Finding]]  # judged nodes only: [] = live (its liveness alerts may clear); absent = unjudged
    cluster: list[Finding]  # [] or the one telemetry_stalled finding
    streaks: dict[str, int]  # node -> judged rounds missed since its newest answer


def sent(state: State, round_: Round, *, keep: int) -> State:
    """The state after sending `round_`; at most `keep` rounds wait for judgement (older ones are dropped unjudged:
    when ingest is that far behind, they are no evidence anyway)."""
    pending = tuple(sorted((*state.pending, round_), key=lambda r: r.at))[-max(1, keep) :]
    return replace(state, pending=pending, last_sent=round_.at)


def missing_share(answers: Answers, at: float, asked: int) -> float:
    """Share of the nodes asked in the round sent at `at` whose answer was not ingested."""
    return max(0, asked - answers.counts.get(at, 0)) / asked if asked else 0.0


def judge(state: State, answers: Answers, progress: Progress, rules: Rules, nodes: Iterable[str]) -> Verdict:
    """Judge the rounds that ingest has caught up with, then every node of `nodes` and the pipeline."""
    horizon = progress.ingested_until
    misses = {n: list(ts) for n, ts in state.misses.items()}
    judged = list(state.judged)
    waiting: list[Round] = []
    for r in state.pending:
        if horizon is None or r.at + rules.answer_s > horizon or r.at > progress.now:
            waiting.append(r)
            continue
        if not r.asked:
            continue
        if missing_share(answers, r.at, len(r.asked)) < rules.stalled_fraction:
            expired = answers.expired.get(r.at, frozenset())
            for n in r.asked:
                if answers.newest.get(n, float("-inf")) < r.at and n not in expired:
                    misses.setdefault(n, []).append(r.at)
        judged.append((r.at, len(r.asked)))
    judged = judged[-rules.unreachable_polls :]

    streaks: dict[str, int] = {}
    kept: dict[str, tuple[float, ...]] = {}
    for n in nodes:
        newest = answers.newest.get(n, float("-inf"))
        still = [t for t in misses.get(n, ()) if t > newest and n not in answers.expired.get(t, frozenset())]
        still = still[-rules.down_polls :]
        streaks[n] = len(still)
        if still:
            kept[n] = tuple(still)

    stalled = _pipeline(state, judged, answers, progress, rules, horizon, waiting)
    out: dict[str, list[Finding]] = {}
    for n, streak in streaks.items():
        if stalled:
            if streak == 0:
                out[n] = []  # it answered since its last miss: its own alerts may clear
            continue  # no new judgement of a node while the pipeline is behind
        out[n] = _node_findings(n, streak, answers.newest.get(n), progress.now, rules)
    new_state = State(pending=tuple(waiting), judged=tuple(judged), misses=kept, last_sent=state.last_sent)
    return Verdict(new_state, out, stalled, streaks)


def _node_findings(node: str, streak: int, newest: float | None, now: float, rules: Rules) -> list[Finding]:
    if streak < rules.unreachable_polls:
        return []
    last = f"last answer to a poll sent {now - newest:.0f} s ago" if newest is not None else "never answered a poll"
    what = f"no answer to the last {streak} polls the other nodes answered ({last})"
    if streak >= rules.down_polls:
        return [Finding(DOWN, "critical", "node", f"{node}/node", f"{what}: node taken out of service", True)]
    return [Finding(UNREACHABLE, "warning", "node", f"{node}/node", f"unreachable: {what}")]


def _pipeline(
    state: State,
    judged: list[tuple[float, int]],
    answers: Answers,
    progress: Progress,
    rules: Rules,
    horizon: float | None,
    waiting: list[Round],
) -> list[Finding]:
    now, limit = progress.now, rules.stall_after_s
    behind: list[str] = []
    if state.last_sent is not None and now - state.last_sent > limit:
        gap = f"no poll was sent for {now - state.last_sent:.0f} s"
        beat = progress.beat_age_s
        if beat is None:
            behind.append(f"beat/polls: {gap} (beat left no heartbeat)")
        elif beat > limit:
            behind.append(f"beat/polls: {gap}, beat's last tick was {beat:.0f} s ago")
        else:
            behind.append(f"broker/polls: {gap} though beat ticks (the poll tasks waited on the broker or a worker)")
    since = horizon if horizon is not None else (waiting[0].at if waiting else None)
    if since is not None and now - since > limit:
        running = ", a batch is running" if progress.ingest_running else ""
        behind.append(
            f"ingest: {now - since:.0f} s behind ({progress.inbox_backlog} results wait in the inbox{running})"
        )
    if len(judged) == rules.unreachable_polls and all(
        missing_share(answers, at, asked) >= rules.stalled_fraction for at, asked in judged
    ):
        at, asked = judged[-1]
        missed = max(0, asked - answers.counts.get(at, 0))
        expired = len(answers.expired.get(at, ()))
        unsent = f", {expired} of them expired on the broker before an agent took them" if expired else ""
        behind.append(
            f"answers: {missed} of {asked} nodes ({missed / asked:.0%}) missed the newest poll, and at least "
            f"{rules.stalled_fraction:.0%} missed each of the last {len(judged)}{unsent}: the broker, the agents or "
            "their network, not the nodes one by one"
        )
    if not behind:
        return []
    message = "telemetry stalled (no node is judged or taken down meanwhile): " + "; ".join(behind)
    return [Finding(STALLED, "warning", CLUSTER_KIND, CLUSTER_KEY, message)]


def beat_findings(age_s: float | None, *, limit_s: float) -> list[Finding]:
    """The beat's heartbeat: a finding when its last tick is older than `limit_s` (or it never ticked: None)."""
    if age_s is not None and age_s <= limit_s:
        return []
    what = "no beat has ticked yet" if age_s is None else f"beat's last tick was {age_s:.0f} s ago"
    message = f"{what} (limit {limit_s:.0f} s): no polls and no periodic scheduling rounds are sent"
    return [Finding(BEAT_STALLED, "critical", CLUSTER_KIND, CLUSTER_KEY, message)]


def cadence(sent: Sequence[float], now: float, rounds: int) -> float | None:
    """Mean seconds between the newest `rounds` rounds sent, the wait since the newest counted as the last gap (a
    poller that sends nothing is as late as that wait). None before the first round."""
    recent = sorted(sent)[-max(1, rounds) :]
    if not recent:
        return None
    return (now - recent[0]) / len(recent)


def poller_findings(
    sent: Sequence[float], *, now: float, rules: Rules, due: int, polled: int, skipped: int = 0
) -> list[Finding]:
    """The poller against its own schedule: one `telemetry_behind` finding when its rounds (send times `sent`) come on
    average more than BEHIND_SLACK intervals apart over the last `rules.unreachable_polls`. `due`: nodes it should
    poll; `polled`: how many of them answered within the last interval; `skipped`: beat's ticks since the newest round
    that found it still being read. A wait past `rules.stall_after_s` since the newest round is a stall, which
    `judge` names (telemetry_stalled), not this."""
    gap = cadence(sent, now, rules.unreachable_polls)
    if gap is None or gap <= BEHIND_SLACK * rules.interval_s or now - max(sent) > rules.stall_after_s:
        return []
    waits = f"; {skipped} polls waited for the previous round to be read" if skipped else ""
    message = (
        f"telemetry polling is behind: {polled} of {due} nodes polled in the last {rules.interval_s:g} s; poll "
        f"cadence {gap:.1f} s instead of {rules.interval_s:g} s{waits}. The control plane is slower than its schedule "
        "(a busy worker or broker, or too little CPU for this many nodes), not the nodes: no node is judged "
        "unreachable or down until it keeps up"
    )
    return [Finding(BEHIND, "warning", CLUSTER_KIND, CLUSTER_KEY, message)]
