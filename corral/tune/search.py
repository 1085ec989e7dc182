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


class LogRandInt(Domain):
    """An int in [lower, upper) whose logarithm is uniform (Tune's ``lograndint``)."""

    def __init__(self, lower: int, upper: int, base: float = 10) -> None:
        if not 0 < lower < upper:
            raise ValueError(f"tune.lograndint needs 0 < lower < upper, got {lower}, {upper}")
        if not base > 0:
            raise ValueError(f"tune.lograndint needs a base > 0, got {base}")
        self.lower, self.upper, self.base = int(lower), int(upper), float(base)

    def sample(self, rng: random.Random, spec: Any) -> int:
        low, high = math.log(self.lower, self.base), math.log(self.upper, self.base)
        # (Floored, as Tune does: upper excluded.)
        return min(int(math.floor(self.base ** rng.uniform(low, high))), self.upper - 1)

    def __repr__(self) -> str:
        return f"lograndint({self.lower}, {self.upper})"


class Normal(Domain):
    """A float drawn from a normal distribution (Tune's ``randn``)."""

    def __init__(self, mean: float = 0.0, sd: float = 1.0) -> None:
        if not sd > 0:
            raise ValueError(f"tune.randn needs sd > 0, got {sd}")
        self.mean, self.sd = float(mean), float(sd)

    def sample(self, rng: random.Random, spec: Any) -> float:
        return rng.gauss(self.mean, self.sd)

    def __repr__(self) -> str:
        return f"randn({self.mean}, {self.sd})"


class Quantized(Domain):
    """A draw of ``domain`` rounded to a multiple of ``q`` (Tune's ``quniform``,
    ``qloguniform``, ``qrandint``, ``qlograndint``, ``qrandn``).

    Rounding makes the upper bound reachable: a quantised int domain draws from
    [lower, upper] (upper included, as Tune documents it, and as the searchers
    convert it); a float one from [lower, upper]. Ints stay ints, floats floats.
    """

    def __init__(
        self, domain: Uniform | LogUniform | RandInt | LogRandInt | Normal, q: float
    ) -> None:
        if isinstance(q, bool) or not isinstance(q, int | float) or not q > 0:
            raise ValueError(f"{_quantized_name(domain)} needs a q > 0, got {q!r}")
        self.is_int = isinstance(domain, RandInt | LogRandInt)
        if self.is_int and int(q) != q:
            raise ValueError(f"{_quantized_name(domain)} needs an int q, got {q!r}")
        if isinstance(domain, Uniform | LogUniform):
            for bound in (domain.lower, domain.upper):
                if not math.isclose(bound / q, round(bound / q)):
                    raise ValueError(
                        f"{_quantized_name(domain)}: the bound {bound} is not a multiple of q={q}"
                    )
        self.domain = domain
        self.q: float = int(q) if self.is_int else float(q)
        # The smallest and largest multiples of q inside the bounds (what a draw is
        # rounded into; what searchers search between).
        self.qlower = (
            math.ceil(self.lower / self.q - 1e-9) * self.q if self.lower > -math.inf else -math.inf
        )
        self.qupper = (
            math.floor(self.upper / self.q + 1e-9) * self.q if self.upper < math.inf else math.inf
        )
        if self.qlower > self.qupper:
            raise ValueError(
                f"{_quantized_name(domain)}: no multiple of q={q} lies between "
                f"{self.lower} and {self.upper}"
            )

    @property
    def lower(self) -> float:
        """The smallest value (-inf for ``qrandn``)."""
        return getattr(self.domain, "lower", -math.inf)

    @property
    def upper(self) -> float:
        """The largest value, included (inf for ``qrandn``)."""
        return getattr(self.domain, "upper", math.inf)

    def sample(self, rng: random.Random, spec: Any) -> float | int:
        domain = self.domain
        if isinstance(domain, RandInt):
            value: float = rng.randint(domain.lower, domain.upper)  # upper included
        elif isinstance(domain, LogRandInt):
            low, high = math.log(domain.lower, domain.base), math.log(domain.upper, domain.base)
            value = domain.base ** rng.uniform(low, high)
        else:
            value = domain.sample(rng, spec)
        return self.quantize(value)

    def quantize(self, value: float) -> float | int:
        """``value`` rounded to a multiple of ``q`` (and kept within the bounds)."""
        rounded = min(max(round(value / self.q) * self.q, self.qlower), self.qupper)
        return int(rounded) if self.is_int else float(rounded)

    def __repr__(self) -> str:
        args = ", ".join(f"{v}" for v in _bounds(self.domain))
        return f"{_quantized_name(self.domain)}({args}, {self.q})"


def _quantized_name(domain: Domain) -> str:
    names = {Uniform: "quniform", LogUniform: "qloguniform", RandInt: "qrandint"}
    names.update({LogRandInt: "qlograndint", Normal: "qrandn"})
    return names.get(type(domain), f"quantized {domain!r}")


def _bounds(domain: Domain) -> tuple[float, float]:
    if isinstance(domain, Normal):
        return domain.mean, domain.sd
    return domain.lower, domain.upper  # type: ignore[attr-defined]


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


def quniform(lower: float, upper: float, q: float) -> Quantized:
    """A float uniformly in [lower, upper], rounded to a multiple of ``q`` (the bounds
    must be multiples of ``q``)."""
    return Quantized(Uniform(lower, upper), q)


def qloguniform(lower: float, upper: float, q: float, base: float = 10) -> Quantized:
    """``loguniform(lower, upper, base)`` rounded to a multiple of ``q`` (the bounds
    must be multiples of ``q``)."""
    return Quantized(LogUniform(lower, upper, base), q)


def qrandint(lower: int, upper: int, q: int = 1) -> Quantized:
    """An int in [lower, upper] (upper included, as in Tune), rounded to a multiple of
    ``q``."""
    return Quantized(RandInt(lower, upper), q)


def lograndint(lower: int, upper: int, base: float = 10) -> LogRandInt:
    """An int in [lower, upper) whose logarithm is uniform."""
    return LogRandInt(lower, upper, base)


def qlograndint(lower: int, upper: int, q: int, base: float = 10) -> Quantized:
    """An int in [lower, upper] (upper included) whose logarithm is uniform, rounded to
    a multiple of ``q``."""
    return Quantized(LogRandInt(lower, upper, base), q)


def randn(mean: float = 0.0, sd: float = 1.0) -> Normal:
    """A float drawn from the normal distribution of ``mean`` and ``sd``."""
    return Normal(mean, sd)


def qrandn(mean: float, sd: float, q: float) -> Quantized:
    """``randn(mean, sd)`` rounded to a multiple of ``q``."""
    return Quantized(Normal(mean, sd), q)


def function(func: Callable[[Any], Any]) -> None:
    """Tune 1.13's deprecated wrapper: raises ``DeprecationWarning`` (as Tune does);
    use the function itself, or ``sample_from(func)``."""
    raise DeprecationWarning(f"wrapping {func} with tune.function() is no longer needed")


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
