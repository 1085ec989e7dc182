"""How a rollout worker configures its policies and where they act.

- `merge_policy_config` / `with_class_defaults`: a policy's config, the trainer's with the
  policy spec's overrides and the keys the policy class's own algorithm defaults
  (`class_default_config`) add.
- `default_policy_mapping_fn`: RLlib's mapping when the config names none.
- `rollout_device` / `place_policy`: `num_gpus_per_worker` (and `_fake_gpus`), where a
  remote worker's policies act.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from corral.agents.config import copy_config, deep_update
from corral.policy.policy import Policy
from corral.policy.sample_batch import DEFAULT_POLICY_ID
from corral.utils.error import NoGPUsError

logger = logging.getLogger(__name__)


def with_class_defaults(policy_class: type, config: dict) -> dict:
    """`config` plus the keys it lacks from the policy class's own algorithm defaults
    (`policy_class.get_default_config()`), so e.g. a `PPOTorchPolicy` under a DQN trainer
    finds `kl_coeff` (RLlib 1.13: `dict(get_default_config(), **config)`)."""
    defaults = class_default_config(policy_class)
    if defaults is None:
        return config
    missing = {k: copy_config(v) for k, v in defaults.items() if k not in config}
    return {**missing, **config} if missing else config


def class_default_config(policy_class: type) -> dict | None:
    """The policy class's own algorithm defaults (`policy_class.get_default_config()`,
    RLlib 1.13's zero-argument function), or None when it has none."""
    get_defaults = getattr(policy_class, "get_default_config", None)
    if not callable(get_defaults):
        return None
    try:
        defaults = get_defaults()
    except TypeError:  # not RLlib's zero-argument function
        return None
    return defaults if isinstance(defaults, dict) else None


def merge_policy_config(base: dict, overrides: dict | None) -> dict:
    """The trainer config with a policy's overrides merged in (nested dicts key by key):
    corral's one recursive merge (`deep_update`) on a copy of the config's containers."""
    return deep_update(copy_config(base), overrides or {}, new_keys_allowed=True)


def default_policy_mapping_fn(agent_id: Any, episode: Any, worker: Any, **kwargs: Any) -> str:
    """Without a `policy_mapping_fn`, every agent plays the default policy (RLlib's rule)."""
    return DEFAULT_POLICY_ID


def rollout_device(config: dict, worker_index: int) -> str | None:
    """Where a rollout worker's policies act (`num_gpus_per_worker`).

    None (the CPU, where policies are built) for the driver's worker (index 0, whose
    policies the learner trains: `num_gpus` is its key) and without
    `num_gpus_per_worker`; "cuda" for a remote worker with `num_gpus_per_worker > 0`
    (the GPU Ray assigned it with backend="ray", the current CUDA device otherwise);
    "cpu" with `_fake_gpus`: the same device code path (`TorchPolicy.to_device`) on the
    CPU.

    Raises:
        NoGPUsError: `num_gpus_per_worker > 0`, no `_fake_gpus`, and torch sees no CUDA
            (a `RuntimeError`, as in RLlib 1.13, and a `ValueError`).
    """
    gpus = config.get("num_gpus_per_worker", 0) or 0
    if worker_index == 0 or gpus <= 0:
        return None
    if config.get("_fake_gpus"):
        return "cpu"
    if not torch.cuda.is_available():
        raise NoGPUsError(
            f"num_gpus_per_worker={gpus}, but torch sees no CUDA GPU in rollout worker "
            f"{worker_index} (torch {torch.__version__}, CUDA build: "
            f"{torch.version.cuda is not None}). Set num_gpus_per_worker=0, or "
            "`_fake_gpus: True` to run the GPU code path on the CPU."
        )
    return "cuda"


def place_policy(policy: Policy, device: str, policy_id: str) -> None:
    """Moves a rollout worker's policy to `device` (`TorchPolicy.to_device`).

    A policy without `to_device` (not a `TorchPolicy`) keeps acting where it is, with a
    warning.
    """
    to_device = getattr(policy, "to_device", None)
    if to_device is None:
        logger.warning(
            "num_gpus_per_worker: policy %r (%s) has no to_device(); it acts on the CPU.",
            policy_id,
            type(policy).__name__,
        )
        return
    to_device(device)
