"""Error types shared by the whole package."""

from __future__ import annotations


class MeghaError(Exception):
    """Base class of the errors Megha reports to users."""


class InputError(MeghaError):
    """Bad user input: a malformed trace, cluster file or option. The message names file, line and field."""


class SimulationError(MeghaError):
    """A run that cannot finish, with the reason (e.g. tasks left unscheduled when no event remains)."""


def did_you_mean(name: str, choices: object) -> str:
    """`` (did you mean 'x'?)`` when one of ``choices`` is close to ``name``, else the empty string."""
    import difflib

    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1, cutoff=0.6)  # type: ignore[attr-defined]
    return f" (did you mean {close[0]!r}?)" if close else ""
