"""``TuneError``: what ``tune.run`` raises when trials did not complete (Ray Tune's)."""

from __future__ import annotations


class TuneError(Exception):
    """Trials of a ``tune.run`` ended in errors (``raise_on_failed_trial``, the default).

    ``args`` are Ray Tune's: the message and the list of failed trials; each holds its
    ``error`` (the exception) and ``error_file`` (its tracebacks). The first failed
    trial's exception is chained as ``__cause__``.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""
