"""``AskTellSearcher``: a ``LibrarySearcher`` for the libraries that ask for a point and are
told its loss (scikit-optimize, Nevergrad, BayesianOptimization).

Each trial's parameters (the library's values by name, JSON) and its loss are recorded, in
order; that record is the searcher's state for ``tune.run(resume=...)``: on restore a
fresh optimizer is told every ended trial again, in order, and the trials still running
are asked again with their parameters (the library's own objects are never pickled).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

from corral.tune.logger import to_jsonable
from corral.tune.suggest.library_searcher import LibrarySearcher, plain
from corral.tune.suggest.suggestion import Searcher

logger = logging.getLogger(__name__)


class AskTellSearcher(LibrarySearcher):
    """The base of corral's wrappers of ask-and-tell optimisers, which minimise a loss
    (the metric, negated for ``mode="max"``).

    A subclass implements ``_start`` (a fresh optimizer), ``_ask`` (the next point),
    ``_tell`` (a point's loss) and may implement ``_handle_of`` (the library's object for
    a point it did not ask, such as one of ``points_to_evaluate``), besides
    ``LibrarySearcher``'s ``_to_library``, ``_own_space`` and ``_param_names``.
    """

    _point_needs_every_param = True

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
        # Every point asked or told, in order: {"trial_id", "params", "loss", "live"}
        # ("trial_id" is None for one told without a trial, "loss" None while it runs or
        # when it failed).
        self._records: list[dict[str, Any]] = []
        self._by_id: dict[str, dict[str, Any]] = {}
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
        record = {"trial_id": trial_id, "params": params, "loss": None, "live": True}
        self._records.append(record)
        self._by_id[trial_id] = record
        self._handles[trial_id] = handle
        self._asked(params)
        return self._suggestion(params)

    def _loss(self, value: float) -> float:
        return -value if self._mode == "max" else value

    def on_trial_complete(
        self, trial_id: str, result: dict | None = None, error: bool = False
    ) -> None:
        """Tells the optimizer the trial's loss (its metric, negated for ``mode="max"``);
        a trial that errors, ends without a result, or whose metric is not a finite
        number is not told (it counts as failed).

        Raises:
            ValueError: ``result`` lacks the metric.
        """
        record = self._by_id.get(trial_id)
        if record is None:
            logger.warning(
                "%s: trial %s was never suggested; ignored", type(self).__name__, trial_id
            )
            return
        value = None if error or not result else self._result_value(trial_id, result)
        loss = None if value is None else self._loss(value)
        handle = self._handles.pop(trial_id, None)
        if not record["live"]:
            # It ended before and ran again (resume="ERRORED_ONLY"): a new observation.
            if loss is None:
                return
            record = dict(record)
            self._records.append(record)
            self._by_id[trial_id] = record
        record["live"], record["loss"] = False, loss
        self._ready()
        if handle is None:
            handle = self._handle_of(record["params"])
        if loss is not None:
            self._tell(record["params"], handle, loss)
        else:
            self._failed(record["params"], handle)

    def _tell_point(self, point: Mapping, value: float) -> None:
        """Tells the optimizer the metric's ``value`` of ``point`` (a config), evaluated
        outside it."""
        self._ready()
        params = plain(self._encoded_point(point))
        loss = self._loss(float(value))
        self._records.append({"trial_id": None, "params": params, "loss": loss, "live": False})
        self._tell(params, self._handle_of(params), loss)

    def observations(self) -> list[tuple[dict[str, Any], float | None]]:
        """What the optimizer was told, in order: each ended point's parameters (the
        library's values by name) and its loss (None: failed, not told)."""
        return [(r["params"], r["loss"]) for r in self._records if not r["live"]]

    # -- state (JSON) ----------------------------------------------------------

    def get_state(self) -> dict:
        """Every point asked or told, in order (its trial id, parameters, loss and
        whether it runs), and how many of ``points_to_evaluate`` were used."""
        return to_jsonable({"points_used": self._points_used, "trials": self._records})

    def set_state(self, state: dict) -> None:
        """Tells a fresh optimizer every ended point of a ``get_state``, in order, and asks
        again for those still running.

        Raises:
            ValueError: ``state`` is not one ``get_state`` wrote for this search space.
        """
        name = type(self).__name__
        try:
            self._restore_points(state)
            records = [self._checked_record(r) for r in state["trials"]]
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"Not a state of {name} for this search space: {e}") from None
        self._check_ready(RuntimeError)
        self._start()
        self._started = True
        self._records, self._by_id, self._handles = [], {}, {}
        for record in records:
            self._records.append(record)
            trial_id, params = record["trial_id"], record["params"]
            if trial_id is not None:
                self._by_id[trial_id] = record
            if record["live"]:
                if trial_id is not None:
                    self._handles[trial_id] = self._handle_of(params)
                self._asked(params)
            else:
                self._asked(params)
                if record["loss"] is not None:
                    self._tell(params, self._handle_of(params), record["loss"])
                else:
                    self._failed(params, self._handle_of(params))

    def _checked_record(self, entry: Any) -> dict[str, Any]:
        trial_id, params, loss, live = (
            entry["trial_id"],
            entry["params"],
            entry["loss"],
            entry["live"],
        )
        if trial_id is not None and not isinstance(trial_id, str):
            raise TypeError(f"trial_id must be a string or null, got {trial_id!r}")
        if not isinstance(params, dict):
            raise TypeError(f"params must be an object, got {params!r}")
        names = self._param_names()
        if names is not None and set(params) != set(names):
            raise ValueError(f"params {sorted(params)} are not the parameters {sorted(names)}")
        if loss is not None and (
            isinstance(loss, bool) or not isinstance(loss, int | float) or not math.isfinite(loss)
        ):
            raise TypeError(f"loss must be a finite number or null, got {loss!r}")
        if not isinstance(live, bool):
            raise TypeError(f"live must be true or false, got {live!r}")
        return {"trial_id": trial_id, "params": params, "loss": loss, "live": live}


__all__ = ["AskTellSearcher"]
