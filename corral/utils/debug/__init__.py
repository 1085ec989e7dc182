"""RLlib 1.13's debugging helpers: seeding and pretty summaries of batches."""

from corral.utils.debug.deterministic import update_global_seed_if_necessary
from corral.utils.debug.summary import summarize

__all__ = ["summarize", "update_global_seed_if_necessary"]
