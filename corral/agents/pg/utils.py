"""RLlib 1.13's PG postprocessing helper."""

from __future__ import annotations

from typing import Any

from corral.evaluation.postprocessing import compute_advantages
from corral.policy.sample_batch import SampleBatch


def post_process_advantages(
    policy: Any,
    sample_batch: SampleBatch,
    other_agent_batches: Any = None,
    episode: Any = None,
) -> SampleBatch:
    """Adds ``advantages``: the discounted returns of the batch's rewards (no value
    function, and the value after the last step taken as 0)."""
    # Positional: RLlib's (rollout, last_r, gamma) form of corral's compute_advantages.
    return compute_advantages(
        sample_batch, 0.0, policy.config["gamma"], use_gae=False, use_critic=False
    )
