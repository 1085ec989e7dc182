"""``ray.tune.utils``: Ray Tune 1.13's helpers that RLlib 1.x code imports
(``from ray.tune.utils import merge_dicts`` ports as ``from corral.tune.utils import
merge_dicts``). See ``util`` (the helpers), ``placement_groups`` and ``log``."""

from corral.tune.utils.util import (
    date_str,
    deep_update,
    diagnose_serialization,
    flatten_dict,
    merge_dicts,
    unflatten_dict,
    unflattened_lookup,
    warn_if_slow,
)

__all__ = [
    "date_str",
    "deep_update",
    "diagnose_serialization",
    "flatten_dict",
    "merge_dicts",
    "unflatten_dict",
    "unflattened_lookup",
    "warn_if_slow",
]
