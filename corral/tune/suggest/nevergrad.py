"""Ray Tune 1.13's ``ray.tune.suggest.nevergrad``: not built (see "Tune's third-party searchers"
in corral/_surface/not_built.py). ``NevergradSearch`` imports and raises
``NotImplementedError`` when used."""

from corral._surface import not_built_stand_in

NevergradSearch = not_built_stand_in("tune.suggest.nevergrad", "NevergradSearch")

__all__ = ["NevergradSearch"]
