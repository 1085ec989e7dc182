"""Ray Tune 1.13's ``ray.tune.suggest.hebo``: not built (see "Tune's third-party searchers"
in corral/_surface/not_built.py). ``HEBOSearch`` imports and raises
``NotImplementedError`` when used."""

from corral._surface import not_built_stand_in

HEBOSearch = not_built_stand_in("tune.suggest.hebo", "HEBOSearch")

__all__ = ["HEBOSearch"]
