"""Errors a user can act on: the CLI prints them as one line and exits non-zero."""


class TritonwatchError(Exception):
    """A domain error: bad input, an unreachable endpoint, an invalid file. Printed as one line."""

    exit_code = 1


class UsageError(TritonwatchError):
    """A flag or config field has a wrong value; the message names it."""

    exit_code = 2
