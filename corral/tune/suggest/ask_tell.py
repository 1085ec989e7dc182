"""``AskTellSearcher``: a ``LibrarySearcher`` for the libraries that ask for a point and are
told its loss (scikit-optimize, Nevergrad, BayesianOptimization).

Each trial's parameters (the library's values by name, JSON) and its loss are recorded, in
order; that record is the searcher's state for ``tune.run(resume=...)``: on restore a
fresh optimizer is told every ended trial again, in order, and the trials still running
are asked again with their parameters (the library's own objects are never pickled).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from corral.tune.suggest.library_searcher import RecordingSearcher, plain
from corral.tune.suggest.suggestion import Searcher


class AskTellSearcher(RecordingSearcher):
    """The base of corral's wrappers of ask-and-tell optimisers, which minimise a loss
    (the metric, negated for ``mode="max"``).

    A subclass implements ``_start`` (a fresh optimizer), ``_ask`` (the next point),
    ``_tell`` (a point's loss) and may implement ``_handle_of`` (the library's object for
    a point it did not ask, such as one of ``points_to_evaluate``), besides
    ``LibrarySearcher``'s ``_to_library``, ``_own_space`` and ``_param_names``.
    """

    _point_needs_every_param = True
    # (A record's outcome is its loss; a point told outside any trial has no trial id.)
    _outcome_key = "loss"
    _anonymous_records = True

    def __init__(
        self,
        metric: str | None,
        mode: str | None,
        points_to_evaluate: Sequence[Mapping] | None,
        max_concurrent: int | None = None,
        use_early_stopped_trials: bool | None = None,
    ) -> None:
        super().__init__(metric, mode, points_to_evaluate, max_concurrent, use_early_stopped_trials)
        self._started = False
        self._handles: dict[str, Any] = {}  # running trial id -> the library's object

    # -- what a subclass implements ------------------------------------------

    def _start(self) -> None:
        """Makes a fresh optimizer (nothing told yet)."""
        raise NotImplementedError

    def _ask(self) -> tuple[dict[str, Any], Any] | str | None:
        """The next point: its parameters by name (the library's values) and the
        library's object to tell its loss with; None to wait, ``Searcher.FINISHED`` when
        the library is done."""
        raise NotImplementedError

    def _handle_of(self, params: dict[str, Any]) -> Any:
        """The library's object for ``params``, a point it did not ask."""
        return None

    def _tell(self, params: dict[str, Any], handle: Any, loss: float) -> None:
        """Tells the optimizer the ``loss`` of ``params`` (``handle``: what ``_ask`` or
        ``_handle_of`` gave for it)."""
        raise NotImplementedError

    def _failed(self, params: dict[str, Any], handle: Any) -> None:
        """Hears that the trial of ``params`` failed (by default the optimizer is told
        nothing)."""

    def _asked(self, params: dict[str, Any]) -> None:
        """Hears that ``params`` were suggested (or restored)."""

    def _warm_start(self) -> None:
        """Tells a new optimizer what is known before its first suggestion (not called
        on a restore, whose state holds it)."""

    def _fits_own(self, key: str, value: Any) -> bool:
        """Whether the library's own search space ``key`` can give ``value``."""
        return True

    def _point_value(self, key: str, value: Any, point: Mapping) -> Any:
        if key not in self._domains and not self._fits_own(key, value):
            raise ValueError(
                f"{type(self).__name__}: the point {dict(point)!r} sets {key}={value!r}, "
                f"which {key}={self._space[key]!r} cannot give"
            )
        return super()._point_value(key, value, point)

    # -- suggestions and results ---------------------------------------------

    def _ready(self) -> None:
        if not self._started:
            self._check_ready(RuntimeError)
            self._start()
            self._started = True
            self._warm_start()

    def suggest(self, trial_id: str) -> dict | str | None:
        self._ready()
        point = self._next_point()
        if point is not None:
            params = plain(self._encoded_point(point))
            handle = self._handle_of(params)
        else:
            asked = self._ask()
            if asked is None or asked == Searcher.FINISHED:
                return asked
            assert not isinstance(asked, str)
            params, handle = plain(asked[0]), asked[1]
        self._record(trial_id, params)
        self._handles[trial_id] = handle
        self._asked(params)
        return self._suggestion(params)

    def _outcome(self, value: float) -> float:
        # (The loss: the metric, negated for mode="max".)
        return -value if self._mode == "max" else value

    def _ended(self, trial_id: str, record: dict[str, Any], result: dict | None) -> None:
        """Tells the optimizer the trial's loss; a failed trial is not told (``_failed``)."""
        handle = self._handles.pop(trial_id, None)
        self._ready()
        if handle is None:
            handle = self._handle_of(record["params"])
        if record["loss"] is not None:
            self._tell(record["params"], handle, record["loss"])
        else:
            self._failed(record["params"], handle)

    def _tell_point(self, point: Mapping, value: float) -> None:
        """Tells the optimizer the metric's ``value`` of ``point`` (a config), evaluated
        outside it."""
        self._ready()
        params = plain(self._encoded_point(point))
        record = self._record(None, params, live=False)
        record["loss"] = self._outcome(float(value))
        self._tell(params, self._handle_of(params), record["loss"])

    # -- state (JSON) ----------------------------------------------------------

    def get_state(self) -> dict:
        """Every point asked or told, in order (its trial id, parameters, loss and
        whether it runs), and how many of ``points_to_evaluate`` were used."""
        return self._records_state()

    def set_state(self, state: dict) -> None:
        """Tells a fresh optimizer every ended point of a ``get_state``, in order, and asks
        again for those still running.

        Raises:
            ValueError: ``state`` is not one ``get_state`` wrote for this search space.
        """
        records = self._restored_records(state)
        self._check_ready(RuntimeError)
        self._start()
        self._started = True
        self._records, self._by_id, self._handles = [], {}, {}
        for record in records:
            self._keep(record)
            trial_id, params = record["trial_id"], record["params"]
            if record["live"]:
                if trial_id is not None:
                    self._handles[trial_id] = self._handle_of(params)
                self._asked(params)
                continue
            self._asked(params)
            if record["loss"] is not None:
                self._tell(params, self._handle_of(params), record["loss"])
            else:
                self._failed(params, self._handle_of(params))


__all__ = ["AskTellSearcher"]
