"""Ray Tune 1.13's ``ray.tune.suggest.skopt``: ``SkOptSearch``, suggestions from a
`scikit-optimize <https://scikit-optimize.github.io>`_ ``Optimizer`` (Bayesian optimisation
with a Gaussian process by default; the ``skopt`` extra: ``pip install 'corral[skopt]'``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from corral.tune.search import Choice, Domain, LogUniform, RandInt, Uniform
from corral.tune.suggest.ask_tell import AskTellSearcher
from corral.tune.suggest.library_searcher import coded_categories, import_library

if TYPE_CHECKING:
    import skopt


class SkOptSearch(AskTellSearcher):
    """Suggests each trial's config with a scikit-optimize ``Optimizer`` (``ask``) and
    tells it each trial's loss (``tell``: the metric, negated for ``mode="max"``).

    Args:
        optimizer: the ``skopt.Optimizer`` to use (seed it with its ``random_state``);
            then ``space`` names its dimensions, in order (a list of names). None: one
            is made (``skopt.Optimizer(dimensions)``, unseeded) from ``space``.
        space: without ``optimizer``, the search space: corral search spaces (``{"lr":
            tune.loguniform(1e-4, 1e-2)}``, converted by ``convert_search_space``) or
            scikit-optimize dimensions by name (``(low, high)`` bounds, a list of
            categories, or ``skopt.space`` dimensions). None: ``tune.run``'s config is
            the search space.
        metric: the result key to optimise (or ``tune.run(metric=...)``; default
            ``"_metric"``).
        mode: "min" or "max" (or ``tune.run(mode=...)``).
        points_to_evaluate: configs to run first, in order; each gives a value for
            every parameter.
        evaluated_rewards: the metric's values of ``points_to_evaluate``, already known:
            the optimizer is told them and those points are not run.
        convert_to_python: Ray Tune's switch to keep numpy values; corral's configs
            always hold Python values (False is refused).
        max_concurrent: Ray Tune's old argument, refused (``ConcurrencyLimiter``).
        use_early_stopped_trials: Ray Tune's old argument; False is refused.

    While trials run, a new suggestion is asked with the "constant liar" strategy
    (``ask(n_points, strategy="cl_min")``) so that it differs from theirs. A trial that
    errors, ends without a result, or whose metric is not a finite number is not told.

    Its state for ``tune.run(resume=...)`` is JSON: every point's parameters and loss,
    in order, told again to a fresh optimizer on restore (``optimizer``: the one the
    resuming call passes).
    """

    def __init__(
        self,
        optimizer: skopt.Optimizer | None = None,
        space: Sequence[str] | Mapping[str, Any] | None = None,
        metric: str | None = None,
        mode: str | None = None,
        points_to_evaluate: Sequence[Mapping] | None = None,
        evaluated_rewards: Sequence[float] | None = None,
        convert_to_python: bool = True,
        max_concurrent: int | None = None,
        use_early_stopped_trials: bool | None = None,
    ) -> None:
        self._sko = import_library("skopt", "SkOptSearch")
        super().__init__(metric, mode, points_to_evaluate, max_concurrent, use_early_stopped_trials)
        if convert_to_python is not True:
            raise ValueError(
                "SkOptSearch(convert_to_python=False) is not built: corral's configs hold "
                f"Python values (its state is JSON), got {convert_to_python!r}"
            )
        if evaluated_rewards is not None and (
            not isinstance(evaluated_rewards, list | tuple)
            or len(evaluated_rewards) != len(self._points)
        ):
            raise ValueError(
                f"SkOptSearch(evaluated_rewards=...) takes one value per point of "
                f"points_to_evaluate ({len(self._points)}), got {evaluated_rewards!r}"
            )
        self._evaluated_rewards = list(evaluated_rewards or ())
        self._optimizer = optimizer
        self._opt: skopt.Optimizer | None = None
        if optimizer is not None:
            if not isinstance(optimizer, self._sko.Optimizer):
                raise TypeError(
                    f"SkOptSearch(optimizer=...) takes a skopt.Optimizer, got {optimizer!r}"
                )
            self._space = self._named_dimensions(optimizer, space)
        elif isinstance(space, list | tuple):
            raise ValueError(
                "SkOptSearch(space=[names]) names the dimensions of an optimizer: pass "
                "optimizer=skopt.Optimizer(...) too, or give space as a dict"
            )
        else:
            self._take_space(space)

    @staticmethod
    def _named_dimensions(optimizer: Any, space: Any) -> dict[str, Any]:
        dimensions = optimizer.space.dimensions
        names = list(space) if isinstance(space, list | tuple) else None
        if names is None or not all(isinstance(n, str) for n in names):
            raise ValueError(
                "SkOptSearch(optimizer=...) needs the names of its dimensions, in order: "
                f"space=['lr', ...] (a list of str), got {space!r}"
            )
        if len(names) != len(dimensions) or len(set(names)) != len(names):
            raise ValueError(
                f"SkOptSearch(space=...) must name each of the optimizer's "
                f"{len(dimensions)} dimensions once, got {names!r}"
            )
        return dict(zip(names, dimensions))

    # -- the search space ----------------------------------------------------

    @classmethod
    def _to_library(cls, name: str, domain: Domain) -> Any:
        space = import_library("skopt", cls.__name__).space
        if isinstance(domain, Choice):
            coded = coded_categories(domain)
            choices = list(range(len(coded))) if coded is not None else domain.categories
            return space.Categorical(choices, name=name)
        if isinstance(domain, Uniform):
            return space.Real(domain.lower, domain.upper, name=name)
        if isinstance(domain, LogUniform):
            return space.Real(domain.lower, domain.upper, prior="log-uniform", name=name)
        if isinstance(domain, RandInt):
            return space.Integer(domain.lower, domain.upper - 1, name=name)
        raise ValueError(f"SkOptSearch cannot search {name}={domain!r}")

    def _own_space(self, space: Any) -> Any:
        if not isinstance(space, Mapping) or not space:
            raise TypeError(
                "SkOptSearch(space=...) takes a dict (of scikit-optimize dimensions or corral "
                f"search spaces), or a list of names with optimizer=..., got {space!r}"
            )
        out = {}
        for key, value in space.items():
            try:
                out[str(key)] = self._sko.space.check_dimension(value)
            except (TypeError, ValueError) as e:
                raise TypeError(
                    f"SkOptSearch's space maps names to scikit-optimize dimensions ((low, "
                    f"high), a list of categories, skopt.space.*), got {key}={value!r} ({e})"
                ) from None
        return out

    def _fits_own(self, key: str, value: Any) -> bool:
        return value in self._space[key]

    def _param_names(self) -> list[str] | None:
        return list(self._space or ())

    # -- the optimizer -------------------------------------------------------

    def _start(self) -> None:
        if self._optimizer is not None:
            self._opt = self._optimizer
        else:
            self._opt = self._sko.Optimizer(list(self._space.values()))

    def _warm_start(self) -> None:
        if self._evaluated_rewards:
            for point, reward in zip(self._points, self._evaluated_rewards):
                self._tell_point(point, reward)
            self._points_used = len(self._points)

    def _ask(self) -> tuple[dict[str, Any], Any]:
        assert self._opt is not None
        names = list(self._space)
        running = [[r["params"][n] for n in names] for r in self._records if r["live"]]
        if not running:
            x = self._opt.ask()
        else:
            # (Without a tell, ask() gives the same point again: lie about the running ones.)
            xs = self._opt.ask(n_points=len(running) + 1, strategy="cl_min")
            x = next((x for x in xs if list(x) not in running), xs[-1])
        return dict(zip(names, x)), None

    def _tell(self, params: dict[str, Any], handle: Any, loss: float) -> None:
        assert self._opt is not None
        self._opt.tell([params[n] for n in self._space], loss)


__all__ = ["SkOptSearch"]
