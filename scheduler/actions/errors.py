"""What the scheduler's actions refuse."""


class ActionError(ValueError):
    """A request the scheduler refuses; the message says why."""


class StaleDecision(Exception):
    """The state a decision was based on changed before it could be applied."""


class Contended(Exception):
    """The database aborted the change for lock conflicts (deadlocks, serialization failures) on every attempt.
    Nothing was written: the same request, sent again a moment later, is expected to succeed."""

    retry_after_s = 1


class RoundBusy(Exception):
    """Another round of the same cluster holds the lock."""
