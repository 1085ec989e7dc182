"""Ray Tune 1.13's ``ray.tune.suggest.bohb``: not built (see "Tune's third-party searchers"
in corral/_surface/not_built.py). ``TuneBOHB`` imports and raises
``NotImplementedError`` when used."""

from corral._surface import not_built_stand_in

TuneBOHB = not_built_stand_in("tune.suggest.bohb", "TuneBOHB")

__all__ = ["TuneBOHB"]
