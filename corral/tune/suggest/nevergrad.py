"""Ray Tune 1.13's ``ray.tune.suggest.nevergrad``: ``NevergradSearch``, suggestions from a
`Nevergrad <https://facebookresearch.github.io/nevergrad>`_ optimizer (derivative-free:
evolution strategies, differential evolution, ``NGOpt``'s choice among them; the
``nevergrad`` extra: ``pip install 'corral[nevergrad]'``)."""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping, Sequence
from typing import Any

from corral.tune.search import Choice, Domain, LogRandInt, LogUniform, RandInt, Uniform
from corral.tune.suggest.ask_tell import AskTellSearcher
from corral.tune.suggest.library_searcher import coded_categories, import_library


class NevergradSearch(AskTellSearcher):
    """Suggests each trial's config with a Nevergrad optimizer (``ask``) and tells it
    each trial's loss (``tell``: the metric, negated for ``mode="max"``).

    Args:
        optimizer: the optimizer: a class (``ng.optimizers.OnePlusOne``) or a configured
            one (``ng.optimizers.NGOpt``, ``ng.families.DifferentialEvolution(...)``),
            made with the search space as its parametrization and ``optimizer_kwargs``
            (``budget``, ``num_workers``, ...); or an optimizer already made, with its
            parametrization (an ``ng.p.Dict``: then ``space`` is None).
        optimizer_kwargs: the arguments the optimizer is made with, besides its
            parametrization (not with an optimizer already made).
        space: the search space: corral search spaces (``{"lr": tune.loguniform(1e-4,
            1e-2)}``, converted by ``convert_search_space``), Nevergrad parameters by
            name, or an ``ng.p.Dict`` of them (seed it: ``space.random_state.seed(0)``).
            None: ``tune.run``'s config is the search space.
        metric: the result key to optimise (or ``tune.run(metric=...)``; default
            ``"_metric"``).
        mode: "min" or "max" (or ``tune.run(mode=...)``).
        points_to_evaluate: configs to run first, in order; each gives a value for
            every parameter.
        max_concurrent: Ray Tune's old argument, refused (``ConcurrencyLimiter``).
        **kwargs: ``use_early_stopped_trials``, Ray Tune's old argument; False is
            refused.

    It suggests as many trials at once as the optimizer's ``num_workers`` (1 unless
    ``optimizer_kwargs`` sets it; asked for more, it returns None: wait). A trial that
    errors, ends without a result, or whose metric is not a finite number is told as
    the worst loss (``inf``: a sequential optimizer waits for every point it asked).

    Its state for ``tune.run(resume=...)`` is JSON: every point's parameters and loss,
    in order, told again to a fresh optimizer on restore (an optimizer you made
    yourself: the one the resuming call passes).
    """

    def __init__(
        self,
        optimizer: Any = None,
        optimizer_kwargs: Mapping[str, Any] | None = None,
        space: Any = None,
        metric: str | None = None,
        mode: str | None = None,
        points_to_evaluate: Sequence[Mapping] | None = None,
        max_concurrent: int | None = None,
        **kwargs: Any,
    ) -> None:
        self._ng = import_library("nevergrad", "NevergradSearch")
        unknown = sorted(set(kwargs) - {"use_early_stopped_trials"})
        if unknown:
            raise TypeError(f"NevergradSearch got unexpected arguments: {', '.join(unknown)}")
        super().__init__(
            metric, mode, points_to_evaluate, max_concurrent, kwargs.get("use_early_stopped_trials")
        )
        base = self._ng.optimization.base
        self._made: Any = None  # an optimizer made by the user
        self._user_dict: Any = None  # an ng.p.Dict given as the space
        self._factory: Any = None  # a class or ConfiguredOptimizer
        if optimizer_kwargs is not None and not isinstance(optimizer_kwargs, Mapping):
            raise TypeError(
                f"NevergradSearch(optimizer_kwargs=...) takes a dict, got {optimizer_kwargs!r}"
            )
        self._optimizer_kwargs = dict(optimizer_kwargs or {})
        if isinstance(optimizer, base.Optimizer):
            if space is not None:
                raise ValueError(
                    "NevergradSearch: an optimizer already made has its search space (its "
                    "parametrization): pass space=None, or pass the optimizer's class"
                )
            if optimizer_kwargs:
                raise ValueError(
                    "NevergradSearch(optimizer_kwargs=...) makes the optimizer: pass the "
                    "optimizer's class or a configured optimizer with it, not one already made"
                )
            self._made = optimizer
            self._space = self._own_space(optimizer.parametrization)
        elif isinstance(optimizer, base.ConfiguredOptimizer) or (
            inspect.isclass(optimizer) and issubclass(optimizer, base.Optimizer)
        ):
            self._factory = optimizer
            self._take_space(space)
        else:
            raise ValueError(
                "NevergradSearch(optimizer=...) takes a Nevergrad optimizer: a class "
                "(ng.optimizers.OnePlusOne), a configured one (ng.optimizers.NGOpt) or one "
                f"already made, got {optimizer!r}"
            )
        self._opt: Any = None

    # -- the search space ----------------------------------------------------

    @classmethod
    def _to_library(cls, name: str, domain: Domain) -> Any:
        p = import_library("nevergrad", cls.__name__).p
        if isinstance(domain, Choice):
            coded = coded_categories(domain)
            return p.Choice(list(range(len(coded))) if coded is not None else domain.categories)
        if isinstance(domain, Uniform):
            return p.Scalar(lower=domain.lower, upper=domain.upper)
        if isinstance(domain, LogUniform):
            return p.Log(lower=domain.lower, upper=domain.upper)
        if isinstance(domain, RandInt):
            return p.Scalar(lower=domain.lower, upper=domain.upper - 1).set_integer_casting()
        if isinstance(domain, LogRandInt):
            return p.Log(lower=domain.lower, upper=domain.upper - 1).set_integer_casting()
        raise ValueError(
            f"NevergradSearch cannot search {name}={domain!r} (it searches choice, uniform, "
            "loguniform, randint and lograndint; Nevergrad has no quantised or normal "
            "parameters): use HyperOptSearch or OptunaSearch"
        )

    def _own_space(self, space: Any) -> Any:
        p = self._ng.p
        if isinstance(space, p.Dict):
            # (Kept whole, with its random state; the space is its parameters by name.)
            self._user_dict = space
            return {str(k): space[k] for k in space.keys()}  # noqa: SIM118 (not iterable)
        if isinstance(space, Mapping) and space:
            for key, value in space.items():
                if not isinstance(value, p.Parameter):
                    raise TypeError(
                        f"NevergradSearch's space maps names to Nevergrad parameters (or "
                        f"corral search spaces), got {key}={value!r}"
                    )
            return {str(k): v for k, v in space.items()}
        raise TypeError(
            "NevergradSearch(space=...) takes a dict (of Nevergrad parameters or corral search "
            f"spaces) or an ng.p.Dict, got {space!r}"
        )

    def _parametrization(self) -> Any:
        if self._user_dict is not None:
            return self._user_dict
        return self._ng.p.Dict(**self._space)

    def _fits_own(self, key: str, value: Any) -> bool:
        try:
            self._space[key].spawn_child(new_value=value)
        except (TypeError, ValueError):
            return False
        return True

    def _param_names(self) -> list[str] | None:
        return list(self._space or ())

    # -- the optimizer -------------------------------------------------------

    def _start(self) -> None:
        if self._made is not None:
            self._opt = self._made
        else:
            self._opt = self._factory(
                parametrization=self._parametrization(), **self._optimizer_kwargs
            )

    def _ask(self) -> tuple[dict[str, Any], Any] | None:
        running = sum(r["live"] for r in self._records)
        if running >= self._opt.num_workers:
            # (Some optimizers, sequential ones, block when asked again before a tell.)
            return None
        candidate = self._opt.ask()
        return dict(candidate.value), candidate

    def _handle_of(self, params: dict[str, Any]) -> Any:
        # Suggested, then asked: the optimizer hears of it as of a point it asked (the
        # sequential ones wait forever for points they asked and take no others).
        self._opt.suggest(params)
        return self._opt.ask()

    def _tell(self, params: dict[str, Any], handle: Any, loss: float) -> None:
        self._opt.tell(handle, loss)

    def _failed(self, params: dict[str, Any], handle: Any) -> None:
        # The worst loss: a sequential optimizer waits for every point it asked.
        self._opt.tell(handle, math.inf)


__all__ = ["NevergradSearch"]
