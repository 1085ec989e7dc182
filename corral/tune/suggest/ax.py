"""Ray Tune 1.13's ``ray.tune.suggest.ax``: not built (see "Tune's third-party searchers"
in corral/_surface/not_built.py). ``AxSearch`` imports and raises
``NotImplementedError`` when used."""

from corral._surface import not_built_stand_in

AxSearch = not_built_stand_in("tune.suggest.ax", "AxSearch")

__all__ = ["AxSearch"]
