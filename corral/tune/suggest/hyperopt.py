"""Ray Tune 1.13's ``ray.tune.suggest.hyperopt``: not built (see "Tune's third-party searchers"
in corral/_surface/not_built.py). ``HyperOptSearch`` imports and raises
``NotImplementedError`` when used."""

from corral._surface import not_built_stand_in

HyperOptSearch = not_built_stand_in("tune.suggest.hyperopt", "HyperOptSearch")

__all__ = ["HyperOptSearch"]
