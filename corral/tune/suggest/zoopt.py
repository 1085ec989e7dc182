"""Ray Tune 1.13's ``ray.tune.suggest.zoopt``: not built (see "Tune's third-party searchers"
in corral/_surface/not_built.py). ``ZOOptSearch`` imports and raises
``NotImplementedError`` when used."""

from corral._surface import not_built_stand_in

ZOOptSearch = not_built_stand_in("tune.suggest.zoopt", "ZOOptSearch")

__all__ = ["ZOOptSearch"]
