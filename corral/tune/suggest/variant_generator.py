"""How a config with ``grid_search`` values and search spaces becomes trials' configs (Ray
Tune 1.13's ``ray.tune.suggest.variant_generator``, whose ``grid_search`` ports as
``from corral.tune.suggest.variant_generator import grid_search``).

One sample of a config is every combination of its ``grid_search`` values, each with
fresh draws of its search spaces (``choice``, ``uniform``, ...); ``num_samples`` samples
repeat that. ``BasicVariantGenerator`` (the default search algorithm of ``tune.run``)
makes its trials from :func:`sample_variants`, and ``corral train`` expands a config
with :func:`config_variants`.
"""

from __future__ import annotations

import copy
import itertools
import random
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from corral.tune.search import Domain, has_domains, resolve, resolve_plain

GRID_SEARCH = "grid_search"


def grid_search(values: Iterable[Any]) -> dict[str, list[Any]]:
    """Mark a config value to be tried with each of ``values``, one trial per value.

    The marker is Ray's ``{"grid_search": [...]}``, so YAML experiment files
    that spell it out by hand are expanded too.
    """
    return {GRID_SEARCH: list(values)}


def sample_variants(
    config: Mapping, rng: random.Random, constant_grid_search: bool = False
) -> list[tuple[dict, str]]:
    """One sample of ``config``: a config per combination of its ``grid_search`` values
    with its search spaces drawn, each with its tag (``"lr=0.01,gamma=0.9"``; "" without
    a grid). The draws are fresh for each combination, or (``constant_grid_search``) made
    once and kept for all of them (``sample_from`` functions still run per combination,
    seeing its grid values).

    Raises:
        ValueError: a grid has no values.
    """
    if constant_grid_search and has_domains(config):
        config = resolve_plain(dict(config), rng)
    variants = []
    for variant, tag in _expand_grid(config):
        if has_domains(variant):
            variant = resolve(variant, rng)
        variants.append((variant, tag))
    return variants


def count_grid_variants(config: Mapping) -> int:
    """How many configs one sample of ``config`` makes (the product of its grids' sizes)."""
    count = 1
    for _, values in grid_paths(config):
        count *= len(values)
    return count


def config_variants(
    config: dict, num_samples: int = 1, rng: random.Random | None = None
) -> list[tuple[dict, str]]:
    """The trials' configs of ``config``: ``num_samples`` times :func:`sample_variants`,
    each with its tag. ``corral train`` expands an experiment's config with it.

    Raises:
        ValueError: ``num_samples`` is not an int >= 1, or a grid has no values.
    """
    check_num_samples(num_samples)
    rng = rng or random.Random()
    variants = []
    for _ in range(num_samples):
        variants.extend(sample_variants(config, rng))
    return variants


def check_num_samples(num_samples: Any) -> None:
    """Raises ``ValueError`` unless ``num_samples`` is an int >= 1."""
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 1:
        raise ValueError(f"num_samples must be an int >= 1, got {num_samples!r}")


def has_unresolved_values(config: Mapping) -> bool:
    """Whether ``config`` holds a ``grid_search`` or a search space (Ray Tune's name)."""
    return has_domains(config) or next(grid_paths(config), None) is not None


def format_vars(params: Mapping[Any, Any]) -> str:
    """A trial's tag from the values it took, keyed by path (a tuple of keys, or a
    string joined by "/"): each value under the last part of its path,
    ``"lr=0.01,gamma=0.9"``."""
    return ",".join(f"{_last(path)}={value}" for path, value in params.items())


def _last(path: Any) -> Any:
    return path[-1] if isinstance(path, tuple) else str(path).split("/")[-1]


def _expand_grid(config: Mapping) -> list[tuple[dict, str]]:
    """Every combination of the config's grid values, with its tag."""
    grids = list(grid_paths(config))
    variants = []
    for values in itertools.product(*(grid_values for _, grid_values in grids)):
        variant = copy.deepcopy(dict(config))
        for (path, _), value in zip(grids, values):
            _set_path(variant, path, copy.deepcopy(value))
        tag = format_vars({path: v for (path, _), v in zip(grids, values)})
        variants.append((variant, tag))
    return variants


def grid_paths(config: Mapping, prefix: tuple = ()) -> Iterator[tuple[tuple, list]]:
    """(path, values) of every ``grid_search`` of ``config``, in order.

    Raises:
        ValueError: a grid has no values.
    """
    for key, value in config.items():
        if not isinstance(value, Mapping):
            continue
        path = (*prefix, key)
        if set(value) == {GRID_SEARCH}:
            values = list(value[GRID_SEARCH])
            if not values:
                raise ValueError(f"grid_search for {'/'.join(map(str, path))} has no values")
            yield path, values
        else:
            yield from grid_paths(value, path)


def parse_spec_vars(
    spec: Mapping,
) -> tuple[list[tuple[tuple, Any]], list[tuple[tuple, Domain]], list[tuple[tuple, list]]]:
    """``spec``'s values by kind, each with its path (a tuple of keys), in order (Ray
    Tune's name): the constants, the search spaces (``Domain``: ``choice``, ``uniform``,
    ...) and the ``grid_search`` values. Nested mappings are walked; a list is one
    constant (search spaces inside it are not walked into)."""
    resolved: list[tuple[tuple, Any]] = []
    domains: list[tuple[tuple, Domain]] = []
    grids: list[tuple[tuple, list]] = []

    def walk(node: Mapping, prefix: tuple) -> None:
        for key, value in node.items():
            path = (*prefix, key)
            if isinstance(value, Domain):
                domains.append((path, value))
            elif isinstance(value, Mapping) and set(value) == {GRID_SEARCH}:
                grids.append((path, list(value[GRID_SEARCH])))
            elif isinstance(value, Mapping) and value:
                walk(value, path)
            else:
                resolved.append((path, value))

    walk(spec, ())
    return resolved, domains, grids


def _set_path(config: dict, path: tuple, value: Any) -> None:
    for key in path[:-1]:
        config = config[key]
    config[path[-1]] = value


def deep_update(config: dict, update: Mapping) -> dict:
    """``config`` with ``update``'s values put in (nested mappings merged, not replaced)."""
    for key, value in update.items():
        current = config.get(key)
        if (
            isinstance(value, Mapping)
            and isinstance(current, dict)
            and set(current) != {GRID_SEARCH}
        ):
            deep_update(config[key], value)
        else:
            config[key] = copy.deepcopy(value)
    return config


def unflatten_dict(flat: Mapping[str, Any], delimiter: str = "/") -> dict:
    """``{"a/b": 1}`` -> ``{"a": {"b": 1}}`` (the inverse of ``flatten_dict``)."""
    out: dict = {}
    for key, value in flat.items():
        node = out
        *parents, last = str(key).split(delimiter)
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out
