"""RLlib 1.13's debugging helpers: seeding, pretty summaries of batches and the
memory-leak checker."""

from corral.utils.debug.deterministic import update_global_seed_if_necessary
from corral.utils.debug.memory import check_memory_leaks
from corral.utils.debug.summary import summarize

__all__ = ["check_memory_leaks", "summarize", "update_global_seed_if_necessary"]
