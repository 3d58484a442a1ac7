"""The error every fabric action raises for a request it refuses."""


class ActionError(ValueError):
    """A request an action refuses; the message says what and where."""
