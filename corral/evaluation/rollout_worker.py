"""`RolloutWorker`: envs + policies + sampler, in the driver or a worker process.

The same class runs as the local worker (index 0, in the driver) and as each
remote worker (index 1..n, behind a backend handle). `sample()` returns
postprocessed batches ready for the learner.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import urllib.parse
from collections.abc import Callable, Container
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import torch

from corral.env.base_env import BaseEnv
from corral.env.env_context import EnvContext
from corral.env.external_env import ExternalEnv, ExternalEnvWrapper, external_worker_env
from corral.env.gym_compat import convert_space, ensure_gymnasium_env, env_name
from corral.env.multi_agent_env import MultiAgentEnv, MultiAgentEnvWrapper, is_multi_agent_env
from corral.env.native_vector_env import batched_worker_env, vectorize_mode
from corral.env.utils import wrap_record_video  # noqa: F401 - its old import path
from corral.env.vector_env import VectorEnv, user_vector_worker_env
from corral.evaluation.async_sampler import AsyncSampler, check_filters
from corral.evaluation.episode import SINGLE_AGENT_ID, Episode
from corral.evaluation.external_env_sampler import ExternalEnvSampler
from corral.evaluation.metrics import RolloutMetrics
from corral.evaluation.multi_agent_sampler import MultiAgentSampler
from corral.evaluation.obs_check import spaces_match
from corral.evaluation.policy_setup import (
    default_policy_mapping_fn,
    merge_policy_config,
    place_policy,
    rollout_device,
    with_class_defaults,
)
from corral.evaluation.sampler import SingleAgentSampler
from corral.evaluation.worker_kwargs import worker_config_from_kwargs
from corral.offline.estimators.off_policy_estimator import OffPolicyEstimator
from corral.offline.estimators.runner import estimate_off_policy, make_estimators
from corral.offline.input_reader import SamplerInput
from corral.offline.inputs import make_worker_io, read_fragment
from corral.policy.policy import Policy, PolicySpec
from corral.policy.policy_map import PolicyMap
from corral.policy.sample_batch import (
    DEFAULT_POLICY_ID,
    MultiAgentBatch,
    SampleBatch,
    concat_samples,
)
from corral.utils import numpy_compat
from corral.utils.compression import compress_batch
from corral.utils.filter import Filter, NoFilter, get_filter
from corral.utils.keyword_aliases import keyword_aliases
from corral.utils.sgd import do_minibatch_sgd

if TYPE_CHECKING:
    from corral.core.learner.distributed import LearnerWorker

logger = logging.getLogger(__name__)

# The rollout worker built last in this process (RLlib 1.13's `get_global_worker`).
_global_worker: RolloutWorker | None = None


def get_global_worker() -> RolloutWorker | None:
    """The rollout worker built last in this process (None before any): in a worker
    process, that worker; in the driver, its evaluation worker if one was built after the
    local worker (RLlib's rule)."""
    return _global_worker


NO_ENV_MESSAGE = (
    "RolloutWorker has no `input_reader` object! Cannot call `sample()`: this worker "
    "was created without an env (the driver's worker has none when num_workers > 0 and "
    "create_env_on_driver is False)."
)


class RolloutWorker:
    """Collects experience from its envs with its policies.

    Args:
        env_creator: builds one env from an `EnvContext`.
        validate_env: called as `validate_env(env, env_context)` on each new env.
        policy_specs: policy id -> `PolicySpec` (spaces None = taken from the env).
        config: the (merged) trainer config.
        worker_index: 0 for the driver's worker, 1..n for remote ones.
        num_workers: number of remote workers in this worker's set.
        spaces: policy id -> (obs space, action space), for a worker without env.
        policy_spec: instead of `policy_specs` and `config`, RLlib 1.13's keywords
            for a worker built by hand: `policy_spec` (a policy class, or a dict of
            policy specs), `policy_config` and the rest of 1.13's (`rollout_fragment_length`,
            `num_envs`, `callbacks`, ...; see `corral.evaluation.worker_kwargs`).
        policy_config: see `policy_spec`.
        recreated_worker: True when this worker replaces a failed one
            (`recreate_failed_workers`); its envs see it in `EnvContext.recreated_worker`.
        **rllib_keywords: see `policy_spec`.
    """

    @classmethod
    def as_remote(
        cls,
        num_cpus: int | None = None,
        num_gpus: float | None = None,
        memory: int | None = None,
        object_store_memory: int | None = None,
        resources: dict | None = None,
    ) -> type:
        """This class as a Ray actor class with these resources (RLlib 1.13's call:
        `RolloutWorker.as_remote(num_cpus=1).remote(env_creator=..., policy_spec=...)`).

        Trainers start their workers themselves (`backend="ray"`); this is for workers
        built by hand.

        Raises:
            ImportError: Ray is not installed (the `ray` extra).
        """
        from corral.evaluation.ray_backend import ray_actor_class

        return ray_actor_class(
            cls,
            num_cpus=num_cpus,
            num_gpus=num_gpus,
            memory=memory,
            object_store_memory=object_store_memory,
            resources=resources,
        )

    def __init__(
        self,
        *,
        env_creator: Callable[[EnvContext], Any],
        validate_env: Callable[[Any, EnvContext], None] | None = None,
        policy_specs: dict[str, PolicySpec] | None = None,
        config: dict | None = None,
        worker_index: int = 0,
        num_workers: int = 0,
        spaces: dict[str, tuple[gym.Space, gym.Space]] | None = None,
        log_dir: str | None = None,
        policy_spec: Any = None,
        policy_config: dict | None = None,
        recreated_worker: bool = False,
        **rllib_keywords: Any,
    ) -> None:
        # User models and envs of RLlib 1.x's time use NumPy 1.x names (`np.product`):
        # a worker process has them as the driver does (`corral.utils.numpy_compat`).
        numpy_compat.install()
        # What `creation_args()` returns: the keywords to build this worker again.
        self._original_kwargs: dict[str, Any] = {
            "env_creator": env_creator,
            "validate_env": validate_env,
            "worker_index": worker_index,
            "num_workers": num_workers,
            "spaces": spaces,
            "log_dir": log_dir,
            "recreated_worker": recreated_worker,
        }
        if config is None:
            self._original_kwargs.update(
                policy_spec=policy_spec, policy_config=policy_config, **rllib_keywords
            )
        else:
            self._original_kwargs.update(policy_specs=policy_specs, config=config)
        if config is None:
            # Built by hand with RLlib 1.13's keywords (`policy_spec=...`, ...). As in
            # RLlib 1.13, `extra_python_environs` go into this process's environment
            # first (a trainer's workers get theirs when their process starts).
            for key, value in (rllib_keywords.get("extra_python_environs") or {}).items():
                os.environ[key] = str(value)
            policy_specs, config = worker_config_from_kwargs(
                policy_spec or rllib_keywords.pop("policy", None), policy_config, rllib_keywords
            )
        elif policy_spec is not None or policy_config is not None or rllib_keywords:
            given = ["policy_spec"] * (policy_spec is not None)
            given += ["policy_config"] * (policy_config is not None) + sorted(rllib_keywords)
            raise TypeError(
                f"RolloutWorker takes either config= and policy_specs= (corral's) or RLlib "
                f"1.13's keywords, not both: got config= and {given}"
            )
        elif policy_specs is None:
            raise TypeError("RolloutWorker(config=...) needs policy_specs=")
        self.config = config
        self.worker_index = worker_index
        self.num_workers = num_workers
        self.log_dir = log_dir
        self.recreated_worker = recreated_worker
        # RLlib 1.13's `spaces` argument as given (policy id -> (obs space, action space)).
        self.spaces = spaces
        self.explore = config.get("explore", True)
        self.global_vars: dict[str, Any] = {"timestep": 0}
        self.seed = self._seed_everything(config.get("seed"))
        self.callbacks = config["callbacks"]()
        self.env_context = EnvContext(
            config.get("env_config") or {},
            worker_index=worker_index,
            vector_index=0,
            remote=bool(config.get("remote_worker_envs")),
            num_workers=num_workers,
            recreated_worker=recreated_worker,
        )
        self.env_creator = env_creator
        self.validate_env = validate_env
        # One worker shows the env (`render_env`) and records it (`record_env`): the
        # local one when it is the only one, else worker 1 (RLlib's choice).
        shows_env = worker_index == (0 if num_workers == 0 else 1)
        self.render_env = shows_env and bool(config.get("render_env"))
        self.record_env = config.get("record_env") if shows_env else False
        self.env = None
        self.async_env: BaseEnv | None = None
        # RLlib 1.13's names, read by `custom_vector_env` functions.
        self.num_envs = int(config.get("num_envs_per_worker", 1))
        self.make_sub_env_fn = self._make_env
        # RLlib 1.13's `custom_vector_env` (MB-MPO's `model_vector_env`): fn(first sub-env)
        # -> this worker's env, called once the policies are built (it may read them).
        custom_vector_env = config.get("custom_vector_env")
        if self._needs_env():
            if custom_vector_env is not None:
                self.env = self._make_env(0)
            else:
                self.async_env = self._make_vector_env()
                if self.async_env is not None:  # None with env=None: offline training
                    self.env = self.async_env.worker_env()
        multiagent = config["multiagent"]
        self.policy_mapping_fn: Callable = multiagent.get("policy_mapping_fn") or (
            default_policy_mapping_fn
        )
        self.policy_map = PolicyMap(
            multiagent.get("policy_map_capacity") or 100,
            multiagent.get("policy_map_cache")
            or (os.path.join(log_dir, "policy_map_cache") if log_dir else None),
        )
        self.policy_map.add_spill_listener(self)
        self.preprocessors: dict[str, Any] = {}
        self.filters: dict[str, Filter] = {}
        # Each policy's own config (its PolicySpec's, without the trainer config): `policy_dict`.
        self._spec_configs: dict[str, dict] = {}
        for pid, policy in self._build_policies(policy_specs, spaces).items():
            self._register_policy(pid, policy)
        self.policies_to_train = multiagent.get("policies_to_train") or list(self.policy_map)
        if custom_vector_env is not None and self.env is not None:
            self.async_env = self._custom_vector_env(custom_vector_env)
            self.env = self.async_env.worker_env()
        # A single-agent env acting with a policy other than `default_policy`: the id
        # its batches go under (`sample` hands them out as a `MultiAgentBatch`).
        self._single_agent_batches_of: str | None = None
        self.sampler: SingleAgentSampler | MultiAgentSampler | AsyncSampler | None = (
            self._make_sampler()
        )
        self._sample_marks: list[int] = []
        # Batches callbacks added with `Episode.add_extra_batch`: the next `sample()`
        # returns them after its own rows.
        self._extra_batches: list[SampleBatch | MultiAgentBatch] = []
        # The learner that trains this worker's policies in place, in a torch.distributed
        # group with other rollout workers (DD-PPO; `setup_torch_data_parallel`).
        self.data_parallel_learner: LearnerWorker | None = None
        # `fake_sampler`: the first batch `sample()` returned, handed out again by every
        # later call (evaluation workers sample their envs whatever it says).
        self._fake_sampler = bool(config.get("fake_sampler")) and not config.get("in_evaluation")
        self._last_batch: SampleBatch | MultiAgentBatch | None = None
        # `input_evaluation`'s estimators, built on first use (`reward_estimators`).
        self._reward_estimators: list[OffPolicyEstimator] | None = None
        # `input` / `output` (corral.offline): where sample() reads and writes batches.
        self.io_context, self.input_reader, self.output_writer = make_worker_io(self)
        if self._samples_async():
            try:
                check_filters(self.filters)
            except ValueError:
                self.stop()  # (the envs are built: close them)
                raise
            self.sampler = AsyncSampler(self.sampler, worker_index)
        global _global_worker
        _global_worker = self

    @property
    def policy_config(self) -> dict:
        """RLlib 1.13's name for the (trainer) config this worker was built with."""
        return self.config

    # -- RLlib 1.13's attributes, read from the config and the policy map ----

    @property
    def batch_mode(self) -> str:
        """ "truncate_episodes" or "complete_episodes" (`batch_mode`)."""
        return self.config.get("batch_mode", "truncate_episodes")

    @property
    def count_steps_by(self) -> str:
        """ "env_steps" or "agent_steps" (`multiagent.count_steps_by`)."""
        return (self.config.get("multiagent") or {}).get("count_steps_by", "env_steps")

    @property
    def rollout_fragment_length(self) -> int:
        """Steps per `sample()` over all sub-envs: `rollout_fragment_length` x `num_envs`
        (RLlib 1.13's value)."""
        return int(self.config.get("rollout_fragment_length", 200)) * self.num_envs

    @property
    def preprocessing_enabled(self) -> bool:
        """False under `_disable_preprocessor_api`, or for an Atari env that DeepMind's
        frame processing already preprocesses (`preprocessor_pref="deepmind"`)."""
        if self.config.get("_disable_preprocessor_api"):
            return False
        from corral.env.utils import is_atari

        model = self.config.get("model") or {}
        return not (
            self.env is not None
            and is_atari(self.env)
            and self.config.get("preprocessor_pref", "deepmind") == "deepmind"
            and not model.get("custom_preprocessor")
        )

    @property
    def policy_dict(self) -> dict[str, PolicySpec]:
        """Policy id -> `PolicySpec` (class, resolved spaces, the policy's own config)
        of every policy of this worker, runtime-added ones included."""
        return {
            pid: PolicySpec(
                self.policy_map.policy_class(pid),
                *self.policy_map.spaces(pid),
                self._spec_configs.get(pid, {}),
            )
            for pid in self.policy_map
        }

    @property
    def reward_estimators(self) -> list[OffPolicyEstimator]:
        """The off-policy estimators (`input_evaluation`) run on the offline input;
        empty when the worker samples its envs."""
        if self._reward_estimators is None:
            self._reward_estimators = make_estimators(self)
        return self._reward_estimators

    @reward_estimators.setter
    def reward_estimators(self, estimators: list[OffPolicyEstimator]) -> None:
        self._reward_estimators = estimators

    @property
    def last_batch(self) -> SampleBatch | MultiAgentBatch | None:
        """With `fake_sampler`: the batch every `sample()` hands out again; else None."""
        return self._last_batch

    def creation_args(self) -> dict:
        """The keyword arguments this worker was built with
        (`RolloutWorker(**worker.creation_args())` builds a like one)."""
        return dict(self._original_kwargs)

    # -- construction -------------------------------------------------------

    def _seed_everything(self, seed: int | None) -> int | None:
        if seed is None:
            return None
        # Distinct, reproducible streams per worker.
        seed = int(seed) + 1000 * self.worker_index

        random.seed(seed)
        np.random.seed(seed % 2**32)
        torch.manual_seed(seed)
        return seed

    def _needs_env(self) -> bool:
        if self.worker_index == 0 and self.num_workers > 0:
            return bool(self.config.get("create_env_on_driver"))
        return True

    def _samples_async(self) -> bool:
        """`sample_async`: whether the sampler runs ahead in a thread (`AsyncSampler`).

        Not for evaluation workers (RLlib's rule: they sample on demand, from the
        weights just synced), a worker that does not read its envs (offline `input`),
        nor an `ExternalEnv`, which already runs in its own thread and waits for
        actions: its sampler stays synchronous.
        """
        if not self.config.get("sample_async") or self.config.get("in_evaluation"):
            return False
        if self.sampler is None or not isinstance(self.input_reader, SamplerInput):
            return False
        if isinstance(self.sampler, ExternalEnvSampler):
            logger.info(
                "sample_async=True: worker %d samples its ExternalEnv synchronously (the "
                "env runs in its own thread already).",
                self.worker_index,
            )
            return False
        return True

    def _make_sampler(self) -> SingleAgentSampler | MultiAgentSampler | None:
        if self.async_env is None:
            return None
        if is_multi_agent_env(self.env):
            return MultiAgentSampler(self, self.async_env, self.config)
        external = isinstance(self.async_env, ExternalEnvWrapper)
        if external and self.async_env.external_env.multi_agent:  # type: ignore[union-attr]
            return ExternalEnvSampler(self, self.async_env, self.config)
        pid = self._single_agent_policy_id()
        if pid != DEFAULT_POLICY_ID:
            self._single_agent_batches_of = pid
        if external:
            return ExternalEnvSampler(self, self.async_env, self.config, pid)
        return SingleAgentSampler(self, self.async_env, self.policy_map[pid], self.config, pid)

    def _single_agent_policy_id(self) -> str:
        """The policy acting in a single-agent env: `default_policy` when there is one,
        else the one `policy_mapping_fn` maps RLlib's single agent id (`agent0`) to
        (e.g. `policies={"main": ...}` with a mapping to "main"). Its batches are a
        `MultiAgentBatch` under that id (see `sample`)."""
        if DEFAULT_POLICY_ID in self.policy_map:
            return DEFAULT_POLICY_ID
        pid = self.policy_mapping_fn(SINGLE_AGENT_ID, None, worker=self)
        if pid not in self.policy_map:
            raise ValueError(
                f"A single-agent env acts with one policy: 'default_policy', or the one "
                f"policy_mapping_fn maps agent id {SINGLE_AGENT_ID!r} to; it returned "
                f"{pid!r}, and the policies are {list(self.policy_map)}."
            )
        return pid

    def _make_env(self, vector_index: int) -> Any:
        env = self._build_env(vector_index)
        if env is not None:
            ctx = self.env_context.copy_with_overrides(vector_index=vector_index)
            self.callbacks.on_sub_environment_created(
                worker=self, sub_environment=env, env_context=ctx
            )
        return env

    def _build_env(self, vector_index: int) -> Any:
        """Creates, validates and (for `record_env`) wraps one sub-env; runs in the
        sub-env's own process with `remote_worker_envs`."""
        ctx = self.env_context.copy_with_overrides(vector_index=vector_index)
        shown = vector_index == 0 and (self.render_env or self.record_env)
        if shown:
            # Read by the creator of Gymnasium ids (`corral.env.utils`): a video needs
            # frames, a window needs "human".
            ctx._render_mode = "rgb_array" if self.record_env else "human"
        env = self.env_creator(ctx)
        if isinstance(env, (gym.vector.VectorEnv, VectorEnv, ExternalEnv)):  # the whole env
            return env
        # An env written for the old gym API (or declaring old `gym.spaces`) is
        # converted here, so every kind of `env` setting gets the same conversion.
        env = ensure_gymnasium_env(env, render_mode=getattr(ctx, "_render_mode", None))
        if env is None:
            return None
        if self.validate_env is not None:
            self.validate_env(env, ctx)
        if not isinstance(env, gym.Env):
            raise ValueError(
                f"The env creator returned {type(env).__name__}, expected a gymnasium.Env "
                "(reset() -> (obs, info), step() -> (obs, reward, terminated, truncated, info))."
            )
        if vector_index == 0 and self.record_env:
            env = wrap_record_video(env, self.record_env, self.log_dir, self._video_prefix())
        return env

    def _video_prefix(self) -> str:
        kind = "evaluation" if self.config.get("in_evaluation") else "rl-video"
        return f"{kind}-worker{self.worker_index}"

    def _make_vector_env(self) -> BaseEnv | None:
        n = int(self.config.get("num_envs_per_worker", 1))
        if n < 1:
            raise ValueError(f"num_envs_per_worker must be >= 1, got {n}.")
        mode = vectorize_mode(self.config)
        if mode != "sequential":  # "native" / "envpool": one batched vector env
            return batched_worker_env(self, n, mode=mode)
        if self.config.get("remote_worker_envs"):
            return self._make_remote_vector_env(n)
        first = self._make_env(0)
        if first is None:
            return None
        if isinstance(first, gym.vector.VectorEnv):  # the env creator built a batched one
            return batched_worker_env(self, n, vector=first)
        if isinstance(first, VectorEnv):  # RLlib's VectorEnv: it steps its sub-envs itself
            return user_vector_worker_env(self.config, first, n)
        if isinstance(first, ExternalEnv):  # it drives itself and asks for actions
            return external_worker_env(self.config, first, n)
        if isinstance(first, MultiAgentEnv):
            return MultiAgentEnvWrapper([first, *(self._make_env(i) for i in range(1, n))])
        return VectorEnv.vectorize_gym_envs(self._make_env, [first], num_envs=n)

    def _make_remote_vector_env(self, n: int) -> BaseEnv:
        """`remote_worker_envs`: every sub-env in a process of its own."""
        if n < 2:
            raise ValueError(
                "remote_worker_envs=True needs num_envs_per_worker > 1 (remote envs only pay "
                "off when several sub-envs step in parallel)."
            )
        from corral.env.remote_vector_env import RemoteVectorEnv

        # Single-agent envs and `MultiAgentEnv`s alike (`vector.multi_agent` says which).
        vector = RemoteVectorEnv(self._build_env, n, worker_index=self.worker_index)
        for i, env in enumerate(vector.envs):
            ctx = self.env_context.copy_with_overrides(vector_index=i)
            self.callbacks.on_sub_environment_created(
                worker=self, sub_environment=env, env_context=ctx
            )
        return vector

    def _custom_vector_env(self, custom_vector_env: Callable[[Any], Any]) -> BaseEnv:
        """`custom_vector_env(self.env)` as this worker's `BaseEnv`: a `BaseEnv` as it is,
        a `VectorEnv` wrapped (`num_envs` must be `num_envs_per_worker` or 1), any other
        env vectorised to `num_envs_per_worker` sub-envs. The function finds this worker
        with `get_global_worker()`, as RLlib's did (its policies are built by then)."""
        global _global_worker
        _global_worker = self
        env = custom_vector_env(self.env)
        if isinstance(env, BaseEnv):
            return env
        if isinstance(env, VectorEnv):
            return user_vector_worker_env(self.config, env, self.num_envs)
        from corral.env.base_env import convert_to_base_env

        return convert_to_base_env(env, make_env=self._make_env, num_envs=self.num_envs)

    def _build_policies(
        self,
        specs: dict[str, PolicySpec],
        spaces: dict[str, tuple] | None,
        base_config: dict | None = None,
    ) -> dict[str, Policy]:
        policies: dict[str, Policy] = {}
        for pid, spec in specs.items():
            if spec.policy_class is None:
                raise ValueError(
                    f"Policy '{pid}' names no policy class and the trainer has no default "
                    "one (`get_default_policy_class()` returned None): give the class in "
                    "its PolicySpec."
                )
            obs_space, act_space = spec.observation_space, spec.action_space
            if spaces and pid in spaces:
                obs_space = obs_space or spaces[pid][0]
                act_space = act_space or spaces[pid][1]
            if self.env is not None and (obs_space is None or act_space is None):
                env_obs_space, env_act_space = self._env_spaces_for(pid)
                obs_space = obs_space or env_obs_space
                act_space = act_space or env_act_space
            if (obs_space is None or act_space is None) and self.env is None:
                # A policy added later to a worker without env: the spaces all
                # existing policies share, if they share one pair.
                known = [(p.observation_space, p.action_space) for p in policies.values()]
                if hasattr(self, "policy_map"):
                    known += list(self.get_spaces().values())
                if known and all(pair == known[0] for pair in known):
                    obs_space, act_space = known[0]
            if self.env is None:  # no env (offline data): the config's spaces, as RLlib 1.13
                obs_space = obs_space or self.config.get("observation_space")
                act_space = act_space or self.config.get("action_space")
            if obs_space is None or act_space is None:
                raise ValueError(
                    f"Cannot infer the spaces of policy '{pid}': no agent of the env maps to "
                    "it (or this worker has no env) and none were given; set "
                    "`observation_space` and `action_space`."
                )
            # Policy specs and config keys written with old `gym.spaces` (RLlib 1.x code).
            obs_space, act_space = convert_space(obs_space), convert_space(act_space)
            self._spec_configs[pid] = dict(spec.config or {})
            policy_config = merge_policy_config(base_config or self.config, spec.config)
            policy_config = with_class_defaults(spec.policy_class, policy_config)
            # Tells the policy's exploration which worker it acts in (e.g.
            # PerWorkerEpsilonGreedy's per-worker epsilon; 0 = the driver's worker).
            policy_config["worker_index"] = self.worker_index
            policy = spec.policy_class(obs_space, act_space, policy_config)
            device = rollout_device(policy_config, self.worker_index)
            if device is not None:
                place_policy(policy, device, pid)
            policies[pid] = policy
        return policies

    def _config_space(self, key: str, env_space: gym.Space) -> gym.Space:
        """`config[key]` ("observation_space"/"action_space") when set, else the env's.

        A config space must describe the env's data (see `spaces_match`): a policy
        built for another shape would fail later, deep inside a forward pass.
        `disable_env_checking` skips the comparison.
        """
        space = convert_space(self.config.get(key))
        if space is None:
            return env_space
        if not self.config.get("disable_env_checking") and not spaces_match(space, env_space):
            sub_envs = getattr(self.env, "get_sub_environments", None)
            env = sub_envs()[0] if callable(sub_envs) and sub_envs() else self.env
            raise ValueError(
                f"`{key}` in the config is {space}, but env '{env_name(env, short=True)}' has "
                f"{env_space}: they must be the same kind of space with the same shape. "
                f"Leave `{key}` None to take the env's (or set `disable_env_checking: True`)."
            )
        return space

    def _env_spaces_for(self, policy_id: str) -> tuple[gym.Space | None, gym.Space | None]:
        """The spaces of `policy_id` as this worker's env shows them.

        For a multi-agent env: the spaces of the first agent that
        `policy_mapping_fn` maps to the policy, or the env's shared spaces when
        no agent does (e.g. a league policy no agent plays yet).
        """
        env = self.env
        if not is_multi_agent_env(env):
            return (
                self._config_space("observation_space", env.observation_space),
                self._config_space("action_space", env.action_space),
            )
        probe = Episode(-1, 0, self.policy_map, self.policy_mapping_fn, worker=self)
        agents = _agent_ids(env)
        for agent in agents:
            if probe.policy_for(agent) == policy_id:
                return env.get_observation_space(agent), env.get_action_space(agent)
        spaces = [(env.get_observation_space(a), env.get_action_space(a)) for a in agents]
        if spaces and all(pair == spaces[0] for pair in spaces):
            return spaces[0]
        return None, None

    def _register_policy(self, policy_id: str, policy: Policy) -> None:
        self.policy_map[policy_id] = policy
        preprocessor = getattr(policy, "preprocessor", None)
        if preprocessor is None and getattr(policy, "observation_space", None) is not None:
            # RLlib 1.13 preprocesses for every policy, custom ones too (one-hot Discrete,
            # flattened Dict/Tuple observations), whether or not the policy has a model.
            from corral.models.preprocessors import preprocessor_for_space

            preprocessor = preprocessor_for_space(
                policy.observation_space, (getattr(policy, "config", None) or {}).get("model")
            )
        self.preprocessors[policy_id] = preprocessor
        # (The preprocessor's shape: a `Policy` of one's own filters its observations too.)
        shape = getattr(preprocessor, "shape", None)
        filter_config = self.config.get("observation_filter", "NoFilter")
        if shape is None or filter_config == "NoFilter":
            self.filters[policy_id] = NoFilter()
        else:
            self.filters[policy_id] = get_filter(filter_config, shape)

    # -- adding and removing policies ---------------------------------------

    def add_policy(
        self,
        policy_id: str,
        policy_cls: type[Policy],
        observation_space: gym.Space | None = None,
        action_space: gym.Space | None = None,
        config: dict | None = None,
        policy_config: dict | None = None,
        policy_mapping_fn: Callable | None = None,
        policies_to_train: list[str] | Callable | None = None,
        *,
        policy_state: dict | None = None,
    ) -> Policy:
        """Builds a new policy and adds it to this worker's policy map.

        A new `policy_mapping_fn` applies to episodes started from now on;
        running episodes keep the mapping they started with. `policy_state`
        (`Policy.get_state()` of another policy, e.g. a league snapshot) is set
        on the new policy right after it is built.
        """
        if policy_id in self.policy_map:
            raise ValueError(f"Policy ID '{policy_id}' already in policy map!")
        if policy_mapping_fn is not None:
            self.set_policy_mapping_fn(policy_mapping_fn)
        spec = PolicySpec(policy_cls, observation_space, action_space, config or {})
        base = self.config if policy_config is None else policy_config
        policy = self._build_policies({policy_id: spec}, None, base)[policy_id]
        if policy_state is not None:
            policy.set_state(policy_state)
        self._register_policy(policy_id, policy)
        if policies_to_train is not None:
            self.set_policies_to_train(policies_to_train)
        elif not callable(self.policies_to_train):
            self.policies_to_train = [*self.policies_to_train, policy_id]
        return policy

    def remove_policy(
        self,
        policy_id: str = DEFAULT_POLICY_ID,
        policy_mapping_fn: Callable | None = None,
        policies_to_train: list[str] | Callable | None = None,
    ) -> None:
        """Removes a policy; episodes still mapped to it drop its trajectories."""
        if policy_id not in self.policy_map:
            raise ValueError(f"Policy ID '{policy_id}' not in policy map!")
        del self.policy_map[policy_id]
        self._spec_configs.pop(policy_id, None)
        self.preprocessors.pop(policy_id, None)
        self.filters.pop(policy_id, None)
        if policy_mapping_fn is not None:
            self.set_policy_mapping_fn(policy_mapping_fn)
        if policies_to_train is not None:
            self.set_policies_to_train(policies_to_train)
        elif not callable(self.policies_to_train):
            self.policies_to_train = [p for p in self.policies_to_train if p != policy_id]

    def set_policy_mapping_fn(self, policy_mapping_fn: Callable) -> None:
        self.policy_mapping_fn = policy_mapping_fn

    def set_policies_to_train(self, policies_to_train: list[str] | Callable) -> None:
        self.policies_to_train = (
            policies_to_train if callable(policies_to_train) else list(policies_to_train)
        )

    def set_is_policy_to_train(
        self, is_policy_to_train: Container[str] | Callable[[str, Any], bool]
    ) -> None:
        """Which policies `is_policy_to_train` (RLlib 1.13's name): a container of
        policy ids, or `fn(policy_id, batch=None) -> bool`."""
        if not callable(is_policy_to_train) and not isinstance(is_policy_to_train, Container):
            raise TypeError(
                "`is_policy_to_train` must be a container of policy ids or a callable "
                f"(policy_id, batch) -> bool, got {is_policy_to_train!r}."
            )
        self.set_policies_to_train(is_policy_to_train)

    # -- sampling -----------------------------------------------------------

    def sample(self) -> SampleBatch | MultiAgentBatch:
        """One fragment from `input`: the envs ("sampler") or offline data; written to `output`.

        With `fake_sampler`, only the first call samples: every later one returns that
        same batch again (a new batch object holding the same column arrays), without
        stepping an env, running the callbacks or writing output, as RLlib 1.13's fake
        sampler does (to measure how fast the learner trains alone).
        """
        if self._last_batch is not None:
            return _same_batch(self._last_batch)
        if self.input_reader is None:
            raise ValueError(NO_ENV_MESSAGE)
        if isinstance(self.input_reader, SamplerInput):
            batch = self.sample_from_env()
        else:
            batch = read_fragment(self)
            # `input_evaluation`: off-policy estimates of the policy's return from the input.
            estimate_off_policy(self, batch)
        self.callbacks.on_sample_end(worker=self, samples=batch)
        # Before compression (RLlib's order): files hold plain columns.
        self.output_writer.write(batch)
        if self.config.get("compress_observations"):
            # After postprocessing and the callbacks (RLlib's order): they see plain
            # observations; replay buffers and learners unpack the rows they use.
            compress_batch(batch)
        if self._fake_sampler:
            self._last_batch = _same_batch(batch)
        return batch

    def sample_from_env(self) -> SampleBatch | MultiAgentBatch:
        """One postprocessed fragment of the envs (`rollout_fragment_length` x envs steps)."""
        if self.sampler is None:
            raise ValueError(NO_ENV_MESSAGE)
        # Where this sample's finished episodes begin in the sampler's list, so
        # that the driver can discard them when it discards the batch
        # (`discard_metrics_of_last_samples`).
        self._sample_marks.append(len(self.sampler._finished))
        if len(self._sample_marks) > 1000:  # no get_metrics for a long time: keep it small
            del self._sample_marks[:-1000]
        # Both samplers postprocess each trajectory with its policy and the
        # `on_postprocess_trajectory` hook (`sampler_base.postprocess_trajectory`).
        batch = self.sampler.sample()
        pid = self._single_agent_batches_of
        if pid is not None and isinstance(batch, SampleBatch):
            batch = MultiAgentBatch({pid: batch}, batch.count)
        if self._extra_batches:
            # (An async sampler's thread may append meanwhile: take the first n only.)
            n = len(self._extra_batches)
            extra = self._extra_batches[:n]
            del self._extra_batches[:n]
            batch = concat_samples([batch, *extra])
        if isinstance(batch, MultiAgentBatch) and set(self.policy_map) == {DEFAULT_POLICY_ID}:
            # RLlib 1.13 (`MultiAgentBatch.wrap_as_needed`): a multi-agent env whose only
            # policy is `default_policy` gives a plain `SampleBatch` of all agents' rows
            # (its count: agent steps).
            batch = MultiAgentBatch.wrap_as_needed(batch.policy_batches, batch.env_steps())
        return batch

    def _add_extra_batch(self, batch: SampleBatch | MultiAgentBatch) -> None:
        """`Episode.add_extra_batch`: `batch` goes out with the next sampled batch."""
        self._extra_batches.append(batch)

    def recreate_sub_environment(self, index: int) -> Any:
        """Closes sub-env `index` and builds a new one in its place
        (`restart_failed_sub_environments`); returns the new sub-env.

        The new env gets the same `EnvContext` (same `vector_index`) and goes
        through `validate_env` and `on_sub_environment_created` as the first did.
        """
        envs = self.async_env.get_sub_environments()
        old = envs[index]
        try:
            old.close()
        except Exception:  # noqa: BLE001 - a broken env may not close cleanly
            logger.debug("Closing failed sub-env %d raised", index, exc_info=True)
        if self.config.get("remote_worker_envs"):
            from corral.env.remote_vector_env import RemoteSubEnv

            # The new child must not hold copies of its siblings' pipe ends.
            others = [e._conn for j, e in enumerate(envs) if j != index]
            new = RemoteSubEnv(self._build_env, index, self.worker_index, others)
            ctx = self.env_context.copy_with_overrides(vector_index=index)
            self.callbacks.on_sub_environment_created(
                worker=self, sub_environment=new, env_context=ctx
            )
        else:
            new = self._make_env(index)
        # The sampler shares this list, so it steps the new env from now on.
        envs[index] = new
        if index == 0:
            self.env = new
        return new

    def reset_sampler(self) -> None:
        """Resets every sub-env and drops unfinished episodes (fresh evaluation)."""
        if self.sampler is not None:
            self.sampler.reset()

    def sample_with_count(self) -> tuple[SampleBatch, int]:
        batch = self.sample()
        return batch, batch.count

    def sample_and_learn(
        self,
        expected_batch_size: int,
        num_sgd_iter: int,
        sgd_minibatch_size: int,
        standardize_fields: list[str],
    ) -> tuple[dict, int]:
        """Samples one batch, then trains this worker's policies on it with minibatch
        SGD (`do_minibatch_sgd`); returns (learner info, rows trained on).

        Raises:
            ValueError: the batch does not hold `expected_batch_size` rows (the
                workers' batch sizes are out of sync).
        """
        batch = self.sample()
        if batch.count != expected_batch_size:
            raise ValueError(
                f"sample_and_learn: expected a batch of {expected_batch_size} rows, sampled "
                f"{batch.count}: the workers' batch sizes are out of sync."
            )
        info = do_minibatch_sgd(
            batch,
            {pid: self.policy_map[pid] for pid in self.get_policies_to_train(batch)},
            self,
            num_sgd_iter,
            sgd_minibatch_size,
            standardize_fields,
        )
        return info, batch.count

    def get_metrics(self) -> list[RolloutMetrics]:
        """Metrics of the episodes finished since the last call (also those an input
        reader reports, e.g. `PolicyServerInput`'s clients' episodes)."""
        self._sample_marks.clear()
        metrics = self.sampler.get_metrics() if self.sampler is not None else []
        from_input = getattr(self.input_reader, "get_metrics", None)
        return metrics + from_input() if callable(from_input) else metrics

    def discard_metrics_of_last_samples(self, num_samples: int) -> int:
        """Forgets the episodes finished during the last `num_samples` calls of
        `sample()` (not yet fetched by `get_metrics`): the driver threw those
        batches away (another worker failed), so the episodes must not be
        reported as trained on. Returns how many episodes were dropped."""
        marks = self._sample_marks
        if self.sampler is None or num_samples <= 0 or not marks:
            return 0
        cut = marks[-min(num_samples, len(marks))]
        del marks[-min(num_samples, len(marks)) :]
        finished = self.sampler._finished
        dropped = len(finished) - cut
        del finished[cut:]
        return dropped

    # -- policies and weights ----------------------------------------------

    def get_policy(self, policy_id: str = DEFAULT_POLICY_ID) -> Policy | None:
        return self.policy_map.get(policy_id)

    def get_spaces(self) -> dict[str, tuple[gym.Space, gym.Space]]:
        return {pid: self.policy_map.spaces(pid) for pid in self.policy_map}

    def get_weights_seqs(self) -> dict[str, int]:
        """Policy id -> update counter (read without loading spilled policies)."""
        return {pid: self.policy_map.weights_seq(pid) for pid in self.policy_map}

    def get_weights(self, policies: list[str] | None = None) -> dict[str, dict]:
        ids = self.policy_map.keys() if policies is None else policies
        return {pid: self.policy_map[pid].get_weights() for pid in ids}

    def set_weights(self, weights: dict[str, dict], global_vars: dict | None = None) -> None:
        for pid, w in weights.items():
            if pid in self.policy_map:
                self.policy_map[pid].set_weights(w)
        if global_vars:
            self.set_global_vars(global_vars)

    def set_global_vars(self, global_vars: dict) -> None:
        """Updates the policies in memory; spilled ones catch up when reloaded."""
        self.global_vars.update(global_vars)
        for pid in self.policy_map.in_memory():
            self.policy_map[pid].on_global_var_update(self.global_vars)

    # PolicyMap spill listener: a reloaded policy gets the current global vars.
    def on_policy_spilled(self, policy_id: str) -> None:
        return None

    def on_policy_restored(self, policy_id: str, state: Any) -> None:
        policy = self.policy_map[policy_id]
        # A policy reloaded from disk is rebuilt on the CPU: back onto the worker's device.
        device = rollout_device(policy.config, self.worker_index)
        if device is not None:
            place_policy(policy, device, policy_id)
        policy.on_global_var_update(self.global_vars)

    def get_global_vars(self) -> dict:
        return dict(self.global_vars)

    def get_state(self) -> dict[str, Any]:
        """Policy states and filters, for checkpoints and new workers."""
        return {
            "policy_states": {pid: p.get_state() for pid, p in self.policy_map.items()},
            "filters": {pid: _filter_state(f) for pid, f in self.filters.items()},
            "global_vars": dict(self.global_vars),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        for pid, policy_state in state["policy_states"].items():
            if pid in self.policy_map:
                self.policy_map[pid].set_state(policy_state)
        for pid, filter_state in state.get("filters", {}).items():
            if pid in self.filters:
                with _filter_lock(self.filters[pid]):
                    self.filters[pid].set_state(filter_state)
        self.global_vars.update(state.get("global_vars", {}))

    def get_resume_state(self) -> dict[str, Any]:
        """What an exact resume needs beyond `get_state`: this process's random
        generators and the sampler's unfinished episodes (None where they cannot be
        replayed: see `corral.evaluation.resume_state`)."""
        from corral.evaluation.resume_state import process_rng_state

        sampler = getattr(self.sampler, "get_resume_state", None)
        return {"rng": process_rng_state(), "sampler": sampler() if sampler else None}

    def set_resume_state(self, state: dict[str, Any]) -> None:
        """Inverse of `get_resume_state` (the generators are restored last, so that
        replaying the envs draws nothing from them)."""
        from corral.evaluation.resume_state import set_process_rng_state

        if state.get("sampler") is not None and self.sampler is not None:
            self.sampler.set_resume_state(state["sampler"])
        set_process_rng_state(state["rng"])

    def get_filters(self, flush_after: bool = False) -> dict[str, Filter]:
        """Copies of this worker's filters; with `flush_after`, their buffers (the
        changes since the last call) are cleared, so the driver counts each
        observation once when it merges them (`FilterManager.synchronize`)."""
        out = {}
        for pid, f in self.filters.items():
            # One step (`sample_async`: the sampling thread updates the filter meanwhile).
            with _filter_lock(f):
                out[pid] = f.as_serializable()
                if flush_after:
                    f.clear_buffer()
        return out

    def sync_filters(self, new_filters: dict[str, Filter]) -> None:
        """Takes over the driver's merged filters (in place: the sampler keeps its
        references)."""
        for pid, new_filter in new_filters.items():
            if pid in self.filters:
                self.filters[pid].sync(new_filter)

    # RLlib 1.x names for the same thing.
    save = get_state

    @keyword_aliases(state="objs")
    def restore(self, objs: dict[str, Any]) -> None:
        """`set_state` by RLlib 1.x's name (`objs`: what `save()` returned; `state`, its
        `set_state` name, also works)."""
        self.set_state(objs)

    def is_policy_to_train(self, policy_id: str, batch: Any = None) -> bool:
        ptt = self.policies_to_train
        return ptt(policy_id, batch) if callable(ptt) else policy_id in ptt

    def get_policies_to_train(self, batch: Any = None) -> set[str]:
        """The ids of this worker's policies to train (RLlib 1.13's set)."""
        return {pid for pid in self.policy_map if self.is_policy_to_train(pid, batch)}

    # -- learning on the worker's own policies (RLlib 1.13's worker-level calls) ----

    def _policy_batches(self, samples: SampleBatch | MultiAgentBatch) -> dict[str, SampleBatch]:
        """The trainable policies' batches of `samples` (a `SampleBatch` is the default
        policy's)."""
        if isinstance(samples, SampleBatch):
            batches = {DEFAULT_POLICY_ID: samples}
        else:
            batches = dict(samples.policy_batches)
        return {pid: b for pid, b in batches.items() if self.is_policy_to_train(pid, samples)}

    def learn_on_batch(self, samples: SampleBatch | MultiAgentBatch) -> dict[str, dict]:
        """One update of each trainable policy on its batch of `samples` (its
        `learn_on_batch`); returns policy id -> that policy's learner info."""
        return {
            pid: self.policy_map[pid].learn_on_batch(batch)
            for pid, batch in self._policy_batches(samples).items()
        }

    def compute_gradients(
        self, samples: SampleBatch | MultiAgentBatch, single_agent: bool | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Each trainable policy's gradients on its batch, without a step: for a
        `SampleBatch`, (gradients, info) of the default policy; for a `MultiAgentBatch`,
        ({policy id: gradients}, {policy id: info}), as RLlib 1.13.

        Args:
            samples: the batch.
            single_agent: RLlib 1.13's switch: True gives the default policy's
                (gradients, info) (of its batch in a `MultiAgentBatch`), False the per-policy
                dicts even for a `SampleBatch`; both add the info's `batch_count` (the
                batch's size) as 1.13 does. None: by the type of `samples` (above).
        """
        if single_agent is True:
            batch = samples
            if isinstance(samples, MultiAgentBatch):
                batch = samples.policy_batches[DEFAULT_POLICY_ID]
            grads, info = self.policy_map[DEFAULT_POLICY_ID].compute_gradients(batch)
            return grads, {**info, "batch_count": samples.count}
        out = {
            pid: self.policy_map[pid].compute_gradients(batch)
            for pid, batch in self._policy_batches(samples).items()
        }
        if isinstance(samples, SampleBatch) and single_agent is None:
            return out[DEFAULT_POLICY_ID] if out else ([], {})
        infos: dict[str, Any] = {pid: i for pid, (_, i) in out.items()}
        if single_agent is False:
            infos["batch_count"] = samples.count
        return {pid: g for pid, (g, _) in out.items()}, infos

    def apply_gradients(self, grads: Any) -> None:
        """One optimiser step of each policy with gradients from `compute_gradients`
        (a dict: per policy id; else the default policy's)."""
        if isinstance(grads, dict):
            for pid, policy_grads in grads.items():
                self.policy_map[pid].apply_gradients(policy_grads)
        else:
            self.policy_map[DEFAULT_POLICY_ID].apply_gradients(grads)

    # -- data-parallel learning (DD-PPO; RLlib 1.13's calls) ---------------------

    def get_node_ip(self) -> str:
        """This worker's address for a torch.distributed rendezvous (loopback with the
        local backend, the node's IP with backend="ray")."""
        from corral.core.learner.distributed import node_address

        return node_address(self.config.get("backend", "local") == "ray")

    def find_free_port(self) -> int:
        """A free TCP port on this worker's machine."""
        from corral.core.learner.distributed import free_port

        return free_port()

    def setup_torch_data_parallel(
        self, url: str, world_rank: int, world_size: int, backend: str
    ) -> None:
        """Joins a torch.distributed group of rollout workers, as RLlib 1.13's DD-PPO has
        its workers do; every member must call this at once.

        The worker gets a `data_parallel_learner` (`LearnerWorker`) that trains its own
        policies to train in place, averaging each gradient across the group, so that
        all members take identical steps. Called again (after a member failed), the
        worker leaves its old group and joins the new one with the learner it has.

        Args:
            url: the rendezvous, "tcp://<address>:<port>" (rank 0's `get_node_ip` and
                `find_free_port`).
            world_rank: this worker's rank in the group (0..world_size-1).
            world_size: the number of members.
            backend: torch.distributed's backend ("gloo", "nccl", "mpi").
        """
        from corral.core.learner.distributed import LearnerWorker
        from corral.evaluation.backend import DEFAULT_CALL_TIMEOUT_S

        where = urllib.parse.urlsplit(url)
        if where.scheme != "tcp" or where.hostname is None or where.port is None:
            raise ValueError(
                f"setup_torch_data_parallel: url must be tcp://<host>:<port>, got {url!r}."
            )
        if self.data_parallel_learner is None:
            device = rollout_device(self.config, self.worker_index) or "cpu"
            self.data_parallel_learner = LearnerWorker(
                {},
                self.config,
                [pid for pid in self.policy_map if self.is_policy_to_train(pid)],
                world_rank,
                world_size,
                device,
                callbacks=self.callbacks,
                policies=self.policy_map,
            )
        timeout_s = float(self.config.get("sample_timeout_s") or DEFAULT_CALL_TIMEOUT_S)
        self.data_parallel_learner.init_group(
            where.hostname, where.port, timeout_s, backend, rank=world_rank, world_size=world_size
        )

    # -- iteration helpers --------------------------------------------------

    def for_policy(self, func: Callable, policy_id: str = DEFAULT_POLICY_ID, **kwargs: Any):
        return func(self.policy_map[policy_id], **kwargs)

    def foreach_policy(self, func: Callable, **kwargs: Any) -> list:
        return [func(p, pid, **kwargs) for pid, p in self.policy_map.items()]

    def foreach_trainable_policy(self, func: Callable, **kwargs: Any) -> list:
        return [
            func(self.policy_map[pid], pid, **kwargs)
            for pid in self.policy_map
            if self.is_policy_to_train(pid)
        ]

    # RLlib 1.13's name (its execution-plan operators call it).
    foreach_policy_to_train = foreach_trainable_policy

    def foreach_env(self, func: Callable) -> list:
        if self.async_env is None:
            return []
        return [func(env) for env in self.async_env.get_sub_environments()]

    def foreach_env_with_context(self, func: Callable) -> list:
        if self.async_env is None:
            return []
        return [
            func(env, self.env_context.copy_with_overrides(vector_index=i))
            for i, env in enumerate(self.async_env.get_sub_environments())
        ]

    def apply(self, func: Callable, *args: Any, **kwargs: Any) -> Any:
        return func(self, *args, **kwargs)

    # -- export and import (RLlib 1.13's worker-level calls; deprecated there for
    #    `Policy.export_model` etc., which they call) ----------------------------

    def export_policy_model(
        self, export_dir: str, policy_id: str = DEFAULT_POLICY_ID, onnx: int | None = None
    ) -> None:
        """`Policy.export_model(export_dir, onnx)` of policy `policy_id`."""
        self.policy_map[policy_id].export_model(export_dir, onnx)

    def export_policy_checkpoint(
        self, export_dir: str, filename_prefix: str = "model", policy_id: str = DEFAULT_POLICY_ID
    ) -> None:
        """`Policy.export_checkpoint(export_dir, filename_prefix)` of policy `policy_id`."""
        self.policy_map[policy_id].export_checkpoint(export_dir, filename_prefix)

    def import_policy_model_from_h5(
        self, import_file: str, policy_id: str = DEFAULT_POLICY_ID
    ) -> None:
        """`Policy.import_model_from_h5(import_file)` of policy `policy_id`."""
        self.policy_map[policy_id].import_model_from_h5(import_file)

    def ping(self) -> str:
        return "pong"

    def get_host(self) -> str:
        return os.uname().nodename

    def get_pid(self) -> int:
        return os.getpid()

    def stop(self) -> None:
        if self.data_parallel_learner is not None:
            self.data_parallel_learner.stop()  # leaves its torch.distributed group
        if isinstance(self.sampler, AsyncSampler):  # before its envs close
            self.sampler.stop()
        close_input = getattr(self.input_reader, "close", None)  # e.g. a Ray Data pass
        if callable(close_input):
            close_input()
        self.output_writer.close()
        if self.async_env is not None:
            self.async_env.stop()

    def __repr__(self) -> str:
        return f"RolloutWorker(index={self.worker_index}, pid={os.getpid()})"


def _same_batch(batch: SampleBatch | MultiAgentBatch) -> SampleBatch | MultiAgentBatch:
    """A new batch object holding `batch`'s column arrays (the fake sampler's answer):
    what a caller replaces or adds in its copy (PPO's standardised advantages, unpacked
    observations) leaves the stored batch as it was."""
    if isinstance(batch, MultiAgentBatch):
        return MultiAgentBatch(
            {pid: b.copy(shallow=True) for pid, b in batch.policy_batches.items()}, batch.count
        )
    return batch.copy(shallow=True)


def _filter_lock(obs_filter: Filter) -> contextlib.AbstractContextManager:
    """The lock of a thread-safe filter (`ConcurrentMeanStdFilter`), else nothing."""
    lock = getattr(obs_filter, "_lock", None)
    return lock if lock is not None else contextlib.nullcontext()


def _filter_state(obs_filter: Filter) -> dict[str, Any]:
    with _filter_lock(obs_filter):
        return obs_filter.get_state()


def _agent_ids(env: Any) -> list[Any]:
    """The agent ids of a multi-agent env (from a reset when it declares none); `env` is a
    `MultiAgentEnv` or a `RemoteSubEnv` standing for one."""
    agents = list(env.possible_agents or env.agents or (env.observation_spaces or {}))
    if not agents:
        obs, _ = env.reset()
        agents = list(obs)
    return agents
