"""Tune's search spaces: values of a config that each trial draws anew.

`tune.run(..., config={"lr": tune.loguniform(1e-4, 1e-2), "gamma": tune.choice([0.95, 0.99])},
num_samples=4)` runs four trials, each with its own draw. With `grid_search` values
in the same config, every grid combination is run `num_samples` times, each time
with fresh draws (Tune's rule). `sample_from(fn)` calls `fn(spec)`, where
`spec.config` is the trial's config with the grid values and the other draws
already in place, so one value can depend on another.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any


class Domain:
    """A value to draw per trial."""

    def sample(self, rng: random.Random, spec: Any) -> Any:
        """One draw, from `rng` (the run's generator)."""
        raise NotImplementedError


class Choice(Domain):
    def __init__(self, categories: Sequence[Any]) -> None:
        self.categories = list(categories)
        if not self.categories:
            raise ValueError("tune.choice needs at least one category")

    def sample(self, rng: random.Random, spec: Any) -> Any:
        return rng.choice(self.categories)

    def __repr__(self) -> str:
        return f"choice({self.categories!r})"


class Uniform(Domain):
    def __init__(self, lower: float, upper: float) -> None:
        if not lower < upper:
            raise ValueError(f"tune.uniform needs lower < upper, got {lower}, {upper}")
        self.lower, self.upper = float(lower), float(upper)

    def sample(self, rng: random.Random, spec: Any) -> float:
        return rng.uniform(self.lower, self.upper)

    def __repr__(self) -> str:
        return f"uniform({self.lower}, {self.upper})"


class LogUniform(Domain):
    def __init__(self, lower: float, upper: float, base: float = 10) -> None:
        if not 0 < lower < upper:
            raise ValueError(f"tune.loguniform needs 0 < lower < upper, got {lower}, {upper}")
        self.lower, self.upper, self.base = float(lower), float(upper), float(base)

    def sample(self, rng: random.Random, spec: Any) -> float:
        low, high = math.log(self.lower, self.base), math.log(self.upper, self.base)
        return self.base ** rng.uniform(low, high)

    def __repr__(self) -> str:
        return f"loguniform({self.lower}, {self.upper})"


class RandInt(Domain):
    def __init__(self, lower: int, upper: int) -> None:
        if not lower < upper:
            raise ValueError(f"tune.randint needs lower < upper, got {lower}, {upper}")
        self.lower, self.upper = int(lower), int(upper)

    def sample(self, rng: random.Random, spec: Any) -> int:
        return rng.randrange(self.lower, self.upper)  # upper excluded, as in Tune

    def __repr__(self) -> str:
        return f"randint({self.lower}, {self.upper})"


class Function(Domain):
    def __init__(self, fn: Callable[[Any], Any]) -> None:
        if not callable(fn):
            raise TypeError(f"tune.sample_from needs a callable, got {fn!r}")
        self.fn = fn

    def sample(self, rng: random.Random, spec: Any) -> Any:
        return self.fn(spec)

    def __repr__(self) -> str:
        return f"sample_from({getattr(self.fn, '__name__', self.fn)!r})"


def choice(categories: Sequence[Any]) -> Choice:
    """One of `categories`, uniformly."""
    return Choice(categories)


def uniform(lower: float, upper: float) -> Uniform:
    """A float uniformly in [lower, upper]."""
    return Uniform(lower, upper)


def loguniform(lower: float, upper: float, base: float = 10) -> LogUniform:
    """A float whose logarithm is uniform in [log lower, log upper]."""
    return LogUniform(lower, upper, base)


def randint(lower: int, upper: int) -> RandInt:
    """An int in [lower, upper)."""
    return RandInt(lower, upper)


def sample_from(fn: Callable[[Any], Any]) -> Function:
    """`fn(spec)`, with `spec.config` the trial's config (other draws resolved first)."""
    return Function(fn)


class _Spec:
    """What `sample_from` functions receive (Tune's `spec`, with `spec.config`)."""

    def __init__(self, config: dict) -> None:
        self.config = _AttrDict(config)


class _AttrDict(dict):
    """A dict whose keys read as attributes too (`spec.config.lr`), as in Tune."""

    def __getattr__(self, name: str) -> Any:
        try:
            value = self[name]
        except KeyError:
            raise AttributeError(name) from None
        return _AttrDict(value) if isinstance(value, dict) else value


def has_domains(config: Any) -> bool:
    """Whether `config` holds any value to draw."""
    if isinstance(config, Domain):
        return True
    if isinstance(config, Mapping):
        return any(has_domains(v) for v in config.values())
    if isinstance(config, list | tuple):
        return any(has_domains(v) for v in config)
    return False


def resolve(config: dict, rng: random.Random) -> dict:
    """`config` with every domain drawn: plain domains first, `sample_from` after them
    (so that those functions see the other draws)."""
    drawn = resolve_plain(config, rng)
    return _draw(drawn, rng, _Spec(drawn), functions=True)


def resolve_plain(config: dict, rng: random.Random) -> dict:
    """`config` with its plain domains drawn; `sample_from` functions are left for
    `resolve` (they may depend on values set later, such as grid values)."""
    return _draw(config, rng, None, functions=False)


def _draw(node: Any, rng: random.Random, spec: Any, functions: bool) -> Any:
    if isinstance(node, Function):
        return node.sample(rng, spec) if functions else node
    if isinstance(node, Domain):
        return node.sample(rng, spec)
    if isinstance(node, dict):
        return {k: _draw(v, rng, spec, functions) for k, v in node.items()}
    if isinstance(node, list):
        return [_draw(v, rng, spec, functions) for v in node]
    return node
