"""Ray Tune 1.13's ``ray.tune.suggest.sigopt``: not built (see "Tune's third-party searchers"
in corral/_surface/not_built.py). ``SigOptSearch`` imports and raises
``NotImplementedError`` when used."""

from corral._surface import not_built_stand_in

SigOptSearch = not_built_stand_in("tune.suggest.sigopt", "SigOptSearch")

__all__ = ["SigOptSearch"]
