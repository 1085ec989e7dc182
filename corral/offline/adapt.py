"""What every offline reader does to a batch before the worker uses it (RLlib 1.13's rules).

- A record holding only the default policy becomes a plain `SampleBatch` (RLlib 2.x
  writes single-agent data as a one-policy `MultiAgentBatch`); a single-agent record
  read by a worker with several policies is an error.
- ``clip_actions``: actions are clipped into the action space's bounds.
- ``_disable_action_flattening``: a Tuple/Dict space's flat action rows become nested.
- ``actions_in_input_normalized=False`` with ``normalize_actions=True``: the recorded
  actions are in the env's bounds, the policy acts in [-1, 1], so they are normalised.
- ``postprocess_inputs``: each episode fragment goes through the current policy's
  `postprocess_trajectory` (for multi-agent data, per policy).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from corral.offline.input_reader import SampleBatchType
from corral.offline.io_context import IOContext
from corral.policy.policy import with_nested_actions
from corral.policy.sample_batch import (
    DEFAULT_POLICY_ID,
    MultiAgentBatch,
    SampleBatch,
    concat_samples,
)
from corral.utils.spaces.space_utils import clip_action, normalize_action


def _policies(ioctx: IOContext) -> Any:
    worker = ioctx.worker
    return getattr(worker, "policy_map", None) if worker is not None else None


def adapt_batch(batch: SampleBatchType, ioctx: IOContext, where: str) -> SampleBatchType:
    """`batch` as the worker of `ioctx` needs it (see the module docstring)."""
    policies = _policies(ioctx)
    if (
        isinstance(batch, MultiAgentBatch)
        and set(batch.policy_batches) == {DEFAULT_POLICY_ID}
        and (policies is None or len(policies) == 1)
    ):
        batch = batch.policy_batches[DEFAULT_POLICY_ID]
    if policies is None:
        return batch
    if isinstance(batch, SampleBatch):
        if len(policies) != 1:
            raise ValueError(
                f"{where}: a single-agent SampleBatch, but this worker has {len(policies)} "
                f"policies ({sorted(policies)}); single-agent data trains one policy."
            )
        pid = next(iter(policies))
        return adapt_actions(batch, policies[pid], ioctx.config)
    for pid, sub in batch.policy_batches.items():
        if pid not in policies:
            raise ValueError(
                f"{where}: data of policy {pid!r}, which this worker does not have "
                f"(its policies: {sorted(policies)})."
            )
        batch.policy_batches[pid] = adapt_actions(sub, policies[pid], ioctx.config)
    return batch


def adapt_actions(batch: SampleBatch, policy: Any, config: Mapping[str, Any]) -> SampleBatch:
    """``clip_actions`` / ``normalize_actions`` on the recorded actions of one policy's
    batch (Box action spaces only); the flat action rows of a Tuple/Dict space nested for
    a policy under `_disable_action_flattening` (files hold them flat)."""
    if SampleBatch.ACTIONS not in batch:
        return batch
    batch = with_nested_actions(policy, batch)
    space = getattr(policy, "action_space", None)
    if not isinstance(space, gym.spaces.Box):
        return batch
    actions = batch[SampleBatch.ACTIONS]
    if config.get("clip_actions"):
        actions = clip_action(actions, space)
    if config.get("normalize_actions") and not config.get("actions_in_input_normalized"):
        actions = normalize_action(actions, space)
    if actions is not batch[SampleBatch.ACTIONS]:
        batch[SampleBatch.ACTIONS] = actions.astype(space.dtype, copy=False)
    return batch


def postprocess_if_needed(batch: SampleBatchType, ioctx: IOContext) -> SampleBatchType:
    """``postprocess_inputs``: runs the current policies' `postprocess_trajectory` per episode."""
    policies = _policies(ioctx)
    if not ioctx.config.get("postprocess_inputs") or policies is None:
        return batch
    if isinstance(batch, SampleBatch):
        return postprocess_episodes(batch, policies[next(iter(policies))])
    return MultiAgentBatch(
        {pid: postprocess_episodes(b, policies[pid]) for pid, b in batch.policy_batches.items()},
        batch.count,
    )


def postprocess_episodes(batch: SampleBatch, policy: Any) -> SampleBatch:
    """The policy's `postprocess_trajectory` on each episode fragment of `batch`."""
    if SampleBatch.EPS_ID not in batch:
        return policy.postprocess_trajectory(batch)
    return concat_samples([policy.postprocess_trajectory(t) for t in batch.split_by_episode()])
