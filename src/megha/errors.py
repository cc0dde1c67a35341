"""Error types shared by the whole package."""

from __future__ import annotations


class MeghaError(Exception):
    """Base class of the errors Megha reports to users."""


class InputError(MeghaError):
    """Bad user input: a malformed trace, cluster file or option. The message names file, line and field."""


class SimulationError(MeghaError):
    """A run that cannot finish, with the reason (e.g. tasks left unscheduled when no event remains)."""
