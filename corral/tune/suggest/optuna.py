"""Ray Tune 1.13's ``ray.tune.suggest.optuna``: not built (see "Tune's third-party searchers"
in corral/_surface/not_built.py). ``OptunaSearch`` imports and raises
``NotImplementedError`` when used."""

from corral._surface import not_built_stand_in

OptunaSearch = not_built_stand_in("tune.suggest.optuna", "OptunaSearch")

__all__ = ["OptunaSearch"]
