"""Ray Tune 1.13's ``ray.tune.suggest.dragonfly``: not built (see "Tune's third-party searchers"
in corral/_surface/not_built.py). ``DragonflySearch`` imports and raises
``NotImplementedError`` when used."""

from corral._surface import not_built_stand_in

DragonflySearch = not_built_stand_in("tune.suggest.dragonfly", "DragonflySearch")

__all__ = ["DragonflySearch"]
