"""The exceptions that the command line turns into one line `patchbench: error: ...` and exit 2."""


class Failed(Exception):
    """Anything the command line reports as one line and exit 2, never as a pass."""


class BadInput(Failed):
    """Input or usage the user must fix: unreadable path, no patch in a mailbox, bad revision."""


class CheckFailed(Failed):
    """The checker itself failed on a file (a rule raised, a query is missing): its verdict on that
    file is unknown, so the run must not report "nothing found"."""
