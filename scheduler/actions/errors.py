"""What the scheduler's actions refuse."""


class ActionError(ValueError):
    """A request the scheduler refuses; the message says why."""


class StaleDecision(Exception):
    """The state a decision was based on changed before it could be applied."""
