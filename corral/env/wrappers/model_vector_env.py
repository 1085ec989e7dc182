"""MB-MPO's rollout-worker envs: the real env's resets and reward function, the learned
dynamics' steps (RLlib 1.13's ``model_vector_env``).

`model_vector_env` is MB-MPO's ``custom_vector_env``: a rollout worker calls it with its
first sub-env once its policies are built. The driver's worker (and every evaluation worker)
keeps the real env; each remote rollout worker gets a `ModelVectorEnv`, whose episodes start
from the real env's resets and then step the worker's dynamics model (its policy's
``dynamics_model``), rewarded by the env's own reward function. The env must implement
``reward(obs, action, obs_next)`` on batches (one row per sub-env, returning one reward per
row), and may implement ``done(obs_next)`` (one bool per row; without it the imagined
episodes end only at the `horizon`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from corral.env.base_env import BaseEnv, convert_to_base_env
from corral.env.vector_env import VectorEnv

# The predicted observations are clipped to this range (RLlib's), besides the space's bounds.
OBS_LIMIT = 1000.0


def find_env_method(env: Any, name: str) -> Callable[..., Any] | None:
    """`env.<name>` when it is callable, looked up on `env` and on the env inside its
    wrappers (`env.unwrapped`); None when neither has it."""
    for candidate in (env, getattr(env, "unwrapped", None)):
        method = getattr(candidate, name, None)
        if callable(method):
            return method
    return None


def model_vector_env(env: Any) -> BaseEnv | VectorEnv:
    """MB-MPO's `custom_vector_env`: the worker's envs, given its first sub-env `env`.

    A remote rollout worker gets a `ModelVectorEnv` of `num_envs_per_worker` sub-envs (the
    real ones reset it; its policy's `dynamics_model` steps it); the driver's worker and
    evaluation workers get the real envs, vectorised as usual.

    Raises:
        RuntimeError: not called while a `RolloutWorker` builds its envs.
    """
    from corral.evaluation.rollout_worker import get_global_worker

    worker = get_global_worker()
    if worker is None:
        raise RuntimeError(
            "model_vector_env(env) is a rollout worker's `custom_vector_env`: it reads the "
            "worker building its envs (get_global_worker()), and there is none."
        )
    if worker.worker_index and not worker.config.get("in_evaluation"):
        return ModelVectorEnv(
            make_env=worker.make_sub_env_fn,
            existing_envs=[env],
            num_envs=worker.num_envs,
            observation_space=env.observation_space,
            action_space=env.action_space,
            seed=worker.seed,
        )
    return convert_to_base_env(env, make_env=worker.make_sub_env_fn, num_envs=worker.num_envs)


class ModelVectorEnv(VectorEnv):
    """Sub-envs stepped by a learned dynamics model, reset and rewarded by real envs.

    An episode starts at a real sub-env's reset; each step, the model predicts every
    sub-env's next observation from its current one and the action (one batch), the real
    env's ``reward(obs, action, obs_next)`` rewards the batch, and its ``done(obs_next)``
    (when it has one) ends episodes. The real sub-envs are never stepped.

    Args:
        make_env: builds real sub-env `i` (`existing_envs` first).
        existing_envs: real sub-envs already built.
        num_envs: the number of sub-envs.
        observation_space: one sub-env's observation space (default: the first env's).
        action_space: one sub-env's action space (default: the first env's).
        env_config: unused (RLlib's signature).
        model: the dynamics model, with ``predict_model_batches(obs, actions, device)``
            taking the env's actions (MB-MPO's `DynamicsEnsembleCustomModel`); None: the
            `dynamics_model` of the first policy of the rollout worker building this env
            (RLlib's way).
        device: where the model runs (None: the model's, or that policy's device).
        seed: the first reset of real sub-env `i` is seeded with ``seed + i`` (None: not
            seeded).

    Raises:
        ValueError: no way to build `num_envs` sub-envs, or the env has no `reward` method.
    """

    def __init__(
        self,
        make_env: Callable[[int], Any] | None = None,
        existing_envs: Sequence[Any] | None = None,
        num_envs: int = 1,
        *,
        observation_space: gym.Space | None = None,
        action_space: gym.Space | None = None,
        env_config: Any = None,
        model: Any = None,
        device: Any = None,
        seed: int | None = None,
    ) -> None:
        envs = list(existing_envs or ())
        if len(envs) < num_envs and make_env is None:
            raise ValueError(
                f"ModelVectorEnv: {len(envs)} existing envs for num_envs={num_envs} and no "
                "make_env to build the rest."
            )
        while len(envs) < num_envs:
            envs.append(make_env(len(envs)))  # type: ignore[misc]
        self.envs = envs
        super().__init__(
            observation_space or envs[0].observation_space,
            action_space or envs[0].action_space,
            num_envs,
        )
        reward = find_env_method(envs[0], "reward")
        if reward is None:
            raise ValueError(
                f"ModelVectorEnv rewards imagined steps with the env's `reward(obs, action, "
                f"obs_next)` method, which {type(envs[0]).__name__} does not have."
            )
        self.reward_fn: Callable[..., Any] = reward
        self.done_fn = find_env_method(envs[0], "done")
        if model is None:
            model, worker_device = _worker_dynamics_model()
            device = device or worker_device
        self.model = model
        self.device = device
        self._seed = seed
        self._seeded = [False] * num_envs
        self.cur_obs: np.ndarray | None = None
        self._started = np.zeros(num_envs, np.bool_)

    def vector_reset(self) -> list[Any]:
        """Resets every real sub-env; their observations start the imagined episodes."""
        return [self.reset_at(i) for i in range(self.num_envs)]

    def reset_at(self, index: int | None = None) -> Any:
        """Resets real sub-env `index`; its observation starts that sub-env's episode."""
        index = index or 0
        seed = None
        if self._seed is not None and not self._seeded[index]:
            seed, self._seeded[index] = self._seed + index, True
        obs, _ = self.envs[index].reset(seed=seed)
        if self.cur_obs is None:
            self.cur_obs = np.zeros((self.num_envs, *np.shape(obs)), np.float32)
        self.cur_obs[index] = obs
        self._started[index] = True
        return obs

    def vector_step(self, actions: Sequence[Any]) -> tuple[list, list, list, list]:
        """One model step of every sub-env: RLlib's `(obs, rewards, dones, infos)` lists.

        Raises:
            ValueError: a sub-env was never reset.
        """
        if self.cur_obs is None or not self._started.all():
            raise ValueError(
                "ModelVectorEnv: reset every sub-env (vector_reset or reset_at) before vector_step."
            )
        obs = self.cur_obs
        env_actions = np.stack([np.asarray(a) for a in actions])
        next_obs = self.model.predict_model_batches(obs, env_actions, device=self.device)
        next_obs = np.clip(next_obs, -OBS_LIMIT, OBS_LIMIT).astype(obs.dtype)
        rewards = np.asarray(self.reward_fn(obs, env_actions, next_obs), np.float64)
        rewards = np.broadcast_to(rewards.reshape(-1), (self.num_envs,))
        if self.done_fn is not None:
            dones = np.asarray(self.done_fn(next_obs), np.bool_).reshape(self.num_envs)
        else:
            dones = np.zeros(self.num_envs, np.bool_)
        self.cur_obs = next_obs
        return (
            list(next_obs.copy()),
            [float(r) for r in rewards],
            [bool(d) for d in dones],
            [{} for _ in range(self.num_envs)],
        )

    def get_sub_environments(self) -> list[Any]:
        """The real sub-envs."""
        return self.envs

    def try_render_at(self, index: int | None = None) -> Any:
        """Nothing: imagined steps have no picture."""
        return None


def _worker_dynamics_model() -> tuple[Any, Any]:
    """(dynamics model, device) of the first policy of the rollout worker being built."""
    from corral.evaluation.rollout_worker import get_global_worker

    worker = get_global_worker()
    models = (
        []
        if worker is None
        else worker.foreach_policy(
            lambda policy, pid: (getattr(policy, "dynamics_model", None), policy.device)
        )
    )
    if not models or models[0][0] is None:
        raise ValueError(
            "ModelVectorEnv steps the `dynamics_model` of its rollout worker's policy (MB-MPO's "
            "MBMPOTorchPolicy); pass `model=` when building one outside such a worker."
        )
    return models[0]


__all__ = ["ModelVectorEnv", "find_env_method", "model_vector_env"]
