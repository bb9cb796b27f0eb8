"""The one exception that the command line turns into `patchbench: error: ...` and exit 2."""


class BadInput(Exception):
    """Input or usage the user must fix: unreadable path, no patch in a mailbox, bad revision."""
