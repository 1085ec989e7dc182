"""Ray Tune 1.13's ``ray.tune.suggest.skopt``: not built (see "Tune's third-party searchers"
in corral/_surface/not_built.py). ``SkOptSearch`` imports and raises
``NotImplementedError`` when used."""

from corral._surface import not_built_stand_in

SkOptSearch = not_built_stand_in("tune.suggest.skopt", "SkOptSearch")

__all__ = ["SkOptSearch"]
