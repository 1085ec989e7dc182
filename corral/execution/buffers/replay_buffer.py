"""RLlib 1.13's `execution.buffers.replay_buffer`: the memory warnings of its buffers.

(`ReplayBuffer` and `PrioritizedReplayBuffer` of this module are
`corral.utils.replay_buffers`'s; `corral._surface` serves them here.)
"""

from __future__ import annotations

from typing import Any

from corral.utils.replay_buffers.replay_buffer import warn_replay_buffer_capacity


def warn_replay_capacity(*, item: Any, num_items: float) -> None:
    """Logs (once) the memory `num_items` items like `item` take; raises ValueError when
    that exceeds the machine's memory."""
    warn_replay_buffer_capacity(item=item, capacity=num_items)


# RLlib 1.13's older name of the same warning.
warn_replay_buffer_size = warn_replay_capacity

__all__ = ["warn_replay_buffer_size", "warn_replay_capacity"]
