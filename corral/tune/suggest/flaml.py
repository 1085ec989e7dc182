"""Ray Tune 1.13's ``ray.tune.suggest.flaml``: not built (see "Tune's third-party searchers"
in corral/_surface/not_built.py). ``BlendSearch``, ``CFO`` import and raise
``NotImplementedError`` when used."""

from corral._surface import not_built_stand_in

BlendSearch = not_built_stand_in("tune.suggest.flaml", "BlendSearch")
CFO = not_built_stand_in("tune.suggest.flaml", "CFO")

__all__ = ["BlendSearch", "CFO"]
