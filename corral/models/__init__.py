"""Models and action distributions: ``ModelCatalog`` picks them from the ``"model"`` config.

``ModelCatalog`` is imported lazily (PEP 562): the config layer imports
``corral.models.model_defaults``, which runs this file, and must not pay for importing torch.
"""

from typing import TYPE_CHECKING, Any

from corral.models.model_defaults import MODEL_DEFAULTS

if TYPE_CHECKING:
    from corral.models.catalog import ModelCatalog

__all__ = ["MODEL_DEFAULTS", "ModelCatalog"]


def __getattr__(name: str) -> Any:
    if name == "ModelCatalog":
        from corral.models.catalog import ModelCatalog

        return ModelCatalog
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
