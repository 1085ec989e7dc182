"""Ray Tune 1.13's ``ray.tune.suggest.bayesopt``: not built (see "Tune's third-party searchers"
in corral/_surface/not_built.py). ``BayesOptSearch`` imports and raises
``NotImplementedError`` when used."""

from corral._surface import not_built_stand_in

BayesOptSearch = not_built_stand_in("tune.suggest.bayesopt", "BayesOptSearch")

__all__ = ["BayesOptSearch"]
