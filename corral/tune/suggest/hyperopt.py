"""Ray Tune 1.13's ``ray.tune.suggest.hyperopt``: ``HyperOptSearch``, suggestions from
`HyperOpt <http://hyperopt.github.io/hyperopt>`_'s Tree-structured Parzen Estimator (the
``hyperopt`` extra: ``pip install 'corral[hyperopt]'``)."""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from corral.tune.logger import to_jsonable
from corral.tune.search import (
    Choice,
    Domain,
    LogRandInt,
    LogUniform,
    Normal,
    Quantized,
    RandInt,
    Uniform,
)
from corral.tune.suggest.library_searcher import (
    LibrarySearcher,
    coded_categories,
    import_library,
    plain,
)

logger = logging.getLogger(__name__)

_MT19937_WORDS = 624  # the length of a numpy RandomState's key


class HyperOptSearch(LibrarySearcher):
    """Suggests each trial's config with HyperOpt's TPE (``tpe.suggest`` over a
    ``hyperopt.Trials``) and records each trial's result in it (minimising the metric,
    or its negative for ``mode="max"``).

    Args:
        space: the search space: corral search spaces (``{"lr": tune.loguniform(1e-4,
            1e-2)}``, converted by ``convert_search_space``) or HyperOpt's own
            (``{"lr": hp.loguniform("lr", -9.2, -4.6)}``, any expression of ``hp``
            nodes, conditional ones too). None: ``tune.run``'s config is the search space.
        metric: the result key to optimise (or ``tune.run(metric=...)``; default
            ``"_metric"``).
        mode: "min" or "max" (or ``tune.run(mode=...)``).
        points_to_evaluate: configs to run first, in order; each gives a value for
            every parameter of the search space.
        n_initial_points: how many trials are drawn at random before TPE models the
            results (``tpe.suggest``'s ``n_startup_jobs``; None: HyperOpt's default).
        random_state_seed: the seed of the draws (None: unseeded).
        gamma: TPE's share of the best trials that model the "good" density (in (0, 1];
            None: HyperOpt's default).
        max_concurrent: Ray Tune's old argument, refused (``ConcurrencyLimiter``).
        use_early_stopped_trials: Ray Tune's old argument; False is refused.

    A trial that errors, ends without a result, or whose metric is not a finite number
    counts as failed (HyperOpt leaves it out). Intermediate results are not used.

    Its state for ``tune.run(resume=...)`` is JSON: every trial's HyperOpt values (a
    choice's index), its loss, whether it is still running, the random state and how
    many of ``points_to_evaluate`` were used; a fresh ``Trials`` is rebuilt from it on
    restore, so a resumed search suggests what it would have without the interruption.
    """

    _point_needs_every_param = True
    _point_choices_as_indices = True

    def __init__(
        self,
        space: Any = None,
        metric: str | None = None,
        mode: str | None = None,
        points_to_evaluate: Sequence[Mapping] | None = None,
        n_initial_points: int | None = 20,
        random_state_seed: int | None = None,
        gamma: float | None = 0.25,
        max_concurrent: int | None = None,
        use_early_stopped_trials: bool | None = None,
    ) -> None:
        self._hpo = import_library("hyperopt", "HyperOptSearch")
        super().__init__(metric, mode, points_to_evaluate, max_concurrent, use_early_stopped_trials)
        if n_initial_points is not None and (
            isinstance(n_initial_points, bool)
            or not isinstance(n_initial_points, int)
            or n_initial_points < 0
        ):
            raise ValueError(
                f"n_initial_points must be an int >= 0 or None, got {n_initial_points!r}"
            )
        if gamma is not None and not (isinstance(gamma, int | float) and 0 < gamma <= 1):
            raise ValueError(f"gamma must be a number in (0, 1] or None, got {gamma!r}")
        if random_state_seed is not None and (
            isinstance(random_state_seed, bool) or not isinstance(random_state_seed, int)
        ):
            raise ValueError(f"random_state_seed must be an int or None, got {random_state_seed!r}")
        options: dict[str, Any] = {}
        if n_initial_points is not None:
            options["n_startup_jobs"] = n_initial_points
        if gamma is not None:
            options["gamma"] = gamma
        self._algo = functools.partial(self._hpo.tpe.suggest, **options)
        self._rstate = np.random.RandomState(random_state_seed)
        self._trials: Any = None  # its hyperopt.Trials
        self._domain: Any = None  # its hyperopt.Domain
        self._tids: dict[str, int] = {}  # tune.run trial id -> its HyperOpt trial id
        self._vals: dict[str, dict[str, list]] = {}  # tune.run trial id -> its values
        self._live: set[str] = set()  # the trials not ended yet
        self._user_labels: dict[str, str] = {}  # a HyperOpt space's paths -> labels
        self._user_choices: dict[str, list] = {}  # its choices' labels -> plain options
        if logging.getLogger("hyperopt").level == logging.NOTSET:
            # (tpe.suggest logs two lines per suggestion at INFO.)
            logging.getLogger("hyperopt").setLevel(logging.WARNING)
        self._take_space(space)

    # -- the search space ----------------------------------------------------

    @classmethod
    def _to_library(cls, name: str, domain: Domain) -> Any:
        hpo = import_library("hyperopt", cls.__name__)
        if isinstance(domain, Choice):
            coded = coded_categories(domain)
            return hpo.hp.choice(
                name, list(range(len(coded))) if coded is not None else list(domain.categories)
            )
        if isinstance(domain, Uniform):
            return hpo.hp.uniform(name, domain.lower, domain.upper)
        if isinstance(domain, LogUniform):
            return hpo.hp.loguniform(name, math.log(domain.lower), math.log(domain.upper))
        if isinstance(domain, RandInt):
            # Each int of [lower, upper) gets the same width: rounds of [lower - 0.5,
            # upper - 0.5) (an ordered parameter, as Ray Tune converts it).
            return hpo.pyll.scope.int(
                hpo.hp.quniform(name, domain.lower - 0.5, domain.upper - 0.5, 1)
            )
        if isinstance(domain, LogRandInt):
            return hpo.pyll.scope.int(
                hpo.hp.qloguniform(name, math.log(domain.lower), math.log(domain.upper - 1), 1)
            )
        if isinstance(domain, Normal):
            return hpo.hp.normal(name, domain.mean, domain.sd)
        if isinstance(domain, Quantized):
            inner, q = domain.domain, domain.q
            if isinstance(inner, Normal):
                return hpo.hp.qnormal(name, inner.mean, inner.sd, q)
            if isinstance(inner, Uniform | RandInt):
                expr = hpo.hp.quniform(name, domain.qlower, domain.qupper, q)
            else:  # loguniform, lograndint: between the multiples of q inside the bounds
                low, high = math.log(domain.qlower), math.log(domain.qupper)
                expr = hpo.hp.qloguniform(name, low, high, q)
            return hpo.pyll.scope.int(expr) if domain.is_int else expr
        raise ValueError(f"HyperOptSearch cannot search {name}={domain!r}")

    def _own_space(self, space: Any) -> Any:
        Apply = self._hpo.pyll.base.Apply
        if not isinstance(space, Mapping | Apply):
            raise TypeError(
                "HyperOptSearch(space=...) takes a dict (of HyperOpt expressions or corral "
                f"search spaces) or a HyperOpt expression, got {space!r}"
            )
        self._user_labels = {}
        if isinstance(space, Mapping):
            for path, node in _leaves(space):
                label = _label_of(node, Apply)
                if label is not None:
                    self._user_labels[path] = label
        self._user_choices = {}
        for node in self._hpo.pyll.toposort(self._hpo.pyll.as_apply(space)):
            label = _label_of(node, Apply) if node.name == "switch" else None
            options = node.pos_args[1:]
            if label is not None and all(
                isinstance(o, self._hpo.pyll.base.Literal) for o in options
            ):
                self._user_choices[label] = [o.obj for o in options]
        return space

    def _param_names(self) -> list[str] | None:
        if self._domains:
            return list(self._domains)
        return list(self._user_labels) or None

    # -- suggestions and results ---------------------------------------------

    def _setup(self) -> None:
        """A fresh ``Trials`` and ``Domain``."""
        self._check_ready(RuntimeError)
        self._domain = self._hpo.Domain(lambda config: config, self._space)
        self._trials = self._hpo.Trials()
        self._tids, self._vals, self._live = {}, {}, set()

    def suggest(self, trial_id: str) -> dict | None:
        if self._trials is None:
            self._setup()
        point = self._next_point()
        if point is not None:
            vals = {label: [v] for label, v in self._point_vals(point).items()}
            tid = self._insert(vals)
        else:
            tid = self._trials.new_trial_ids(1)[0]
            seed = int(self._rstate.randint(2**31 - 1))
            (doc,) = self._algo([tid], self._domain, self._trials, seed)
            self._trials.insert_trial_docs([doc])
            self._trials.refresh()
            vals = doc["misc"]["vals"]
        vals = {label: [plain(v) for v in values] for label, values in vals.items()}
        self._tids[trial_id], self._vals[trial_id] = tid, vals
        self._live.add(trial_id)
        return self._config(vals, point)

    def _point_vals(self, point: Mapping) -> dict[str, Any]:
        """A point of ``points_to_evaluate`` as HyperOpt's values by label."""
        out = {}
        for key, value in self._encoded_point(point).items():
            label = self._user_labels.get(key, key)
            options = self._user_choices.get(label)
            if options is not None:
                if value not in options:
                    raise ValueError(
                        f"HyperOptSearch: the point {dict(point)!r} sets {key}={value!r}, "
                        f"which is none of its choices {options!r}"
                    )
                value = options.index(value)
            out[label] = value
        return out

    def _config(self, vals: Mapping[str, list], point: Mapping | None) -> dict:
        assignment = {label: values[0] for label, values in vals.items() if values}
        try:
            config = self._hpo.space_eval(self._space, assignment)
        except (AssertionError, KeyError, TypeError) as e:
            if point is None:
                raise
            raise ValueError(
                f"HyperOptSearch cannot make a config of the point {dict(point)!r} ({e!r}): "
                "a point of points_to_evaluate gives a value for every parameter of the "
                "search space"
            ) from e
        return self._suggestion(config) if self._domains else plain(config)

    def _insert(self, vals: Mapping[str, list], loss: float | None = None) -> int:
        """Adds a trial of ``vals`` to the ``Trials`` (done with ``loss``, else new);
        returns its HyperOpt id."""
        tid = self._trials.new_trial_ids(1)[0]
        labels = list(self._domain.params)
        misc = {
            "tid": tid,
            "cmd": self._domain.cmd,
            "workdir": self._domain.workdir,
            "idxs": {label: [tid] if vals.get(label) else [] for label in labels},
            "vals": {label: list(vals.get(label) or []) for label in labels},
        }
        (doc,) = self._trials.new_trial_docs([tid], [None], [self._domain.new_result()], [misc])
        if loss is not None:
            doc["state"] = self._hpo.JOB_STATE_DONE
            doc["result"] = {"loss": loss, "status": self._hpo.STATUS_OK}
        self._trials.insert_trial_docs([doc])
        self._trials.refresh()
        return tid

    def on_trial_complete(
        self, trial_id: str, result: dict | None = None, error: bool = False
    ) -> None:
        """Records the trial's loss (its metric, negated for ``mode="max"``), or marks it
        failed (an error, no result, a metric that is not a finite number).

        Raises:
            ValueError: ``result`` lacks the metric.
        """
        vals = self._vals.get(trial_id)
        if vals is None:
            logger.warning("HyperOptSearch: trial %s was never suggested; ignored", trial_id)
            return
        value = None if error or not result else self._result_value(trial_id, result)
        loss = None if value is None else (-value if self._mode == "max" else value)
        if trial_id not in self._live:
            if loss is not None:
                # It ended before and ran again (resume="ERRORED_ONLY"): a new observation.
                self._tids[trial_id] = self._insert(vals, loss)
            return
        self._live.discard(trial_id)
        tid = self._tids[trial_id]
        doc = next(d for d in self._trials.trials if d["tid"] == tid)
        if loss is None:
            doc["state"] = self._hpo.JOB_STATE_ERROR
            doc["misc"]["error"] = ("TuneError", "failed" if error else "no result")
        else:
            doc["state"] = self._hpo.JOB_STATE_DONE
            doc["result"] = {"loss": loss, "status": self._hpo.STATUS_OK}
        self._trials.refresh()

    # -- state (JSON) ----------------------------------------------------------

    def get_state(self) -> dict:
        """Every trial's values, loss (null: failed or running) and whether it runs, in
        the order they were suggested; the random state; how many of
        ``points_to_evaluate`` were used."""
        losses = {}
        if self._trials is not None:
            losses = {
                d["tid"]: d["result"]["loss"]
                for d in self._trials.trials
                if d["state"] == self._hpo.JOB_STATE_DONE
            }
        rstate = self._rstate.get_state(legacy=False)
        return to_jsonable(
            {
                "points_used": self._points_used,
                "trials": [
                    {
                        "trial_id": trial_id,
                        "vals": vals,
                        "loss": losses.get(self._tids[trial_id]),
                        "live": trial_id in self._live,
                    }
                    for trial_id, vals in self._vals.items()
                ],
                "rstate": {
                    "key": rstate["state"]["key"],
                    "pos": rstate["state"]["pos"],
                    "has_gauss": rstate["has_gauss"],
                    "gauss": rstate["gauss"],
                },
            }
        )

    def set_state(self, state: dict) -> None:
        """Rebuilds the ``Trials`` from a ``get_state`` (the trials that ran and those
        still running, in order; the failed ones are kept aside, for a new run of them)
        and puts the random state back.

        Raises:
            ValueError: ``state`` is not one ``get_state`` wrote, or names parameters this
                search space lacks.
        """
        self._setup()
        labels = set(self._domain.params)
        try:
            self._restore_points(state)
            rstate = state["rstate"]
            key = rstate["key"]
            if not (isinstance(key, list) and len(key) == _MT19937_WORDS):
                raise ValueError(f"rstate.key must be a list of {_MT19937_WORDS} ints")
            self._rstate.set_state(
                {
                    "bit_generator": "MT19937",
                    "state": {"key": np.asarray(key, dtype=np.uint32), "pos": int(rstate["pos"])},
                    "has_gauss": int(rstate["has_gauss"]),
                    "gauss": float(rstate["gauss"]),
                }
            )
            for entry in state["trials"]:
                trial_id, vals, loss = str(entry["trial_id"]), entry["vals"], entry["loss"]
                _check_vals(vals, labels)
                if loss is not None and not (
                    isinstance(loss, int | float) and not isinstance(loss, bool)
                ):
                    raise TypeError(f"loss must be a number or null, got {loss!r}")
                self._vals[trial_id] = vals
                if entry["live"] is True:
                    self._live.add(trial_id)
                if loss is not None or trial_id in self._live:
                    self._tids[trial_id] = self._insert(vals, loss)
                else:
                    self._tids[trial_id] = -1  # failed: HyperOpt leaves it out
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"Not a state of HyperOptSearch for this search space: {e}") from None


def _leaves(space: Mapping, prefix: str = "") -> list[tuple[str, Any]]:
    """The values of a (nested) dict, each with its path joined by "/"."""
    out: list[tuple[str, Any]] = []
    for key, value in space.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.extend(_leaves(value, f"{path}/"))
        else:
            out.append((path, value))
    return out


def _label_of(node: Any, apply_type: Any) -> str | None:
    """The label of the HyperOpt parameter ``node`` draws (through ``scope.int``, a
    choice's ``switch``, ...), or None."""
    while isinstance(node, apply_type):
        if node.name == "hyperopt_param":
            label = node.arg["label"].eval()
            return label if isinstance(label, str) else None
        if not node.pos_args:
            return None
        node = node.pos_args[0]
    return None


def _check_vals(vals: Any, labels: set[str]) -> None:
    if not isinstance(vals, dict):
        raise TypeError(f"vals must be an object, got {vals!r}")
    for label, values in vals.items():
        if label not in labels:
            raise ValueError(f"the parameter {label!r} is not in the search space")
        if not isinstance(values, list) or len(values) > 1:
            raise TypeError(f"vals[{label!r}] must be a list of at most one value")
        if values and (isinstance(values[0], bool) or not isinstance(values[0], int | float)):
            raise TypeError(f"vals[{label!r}] must hold a number, got {values[0]!r}")


__all__ = ["HyperOptSearch"]
