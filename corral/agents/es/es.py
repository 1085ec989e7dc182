"""Evolution strategies (Salimans et al., 2017, arXiv:1703.03864) through the classic
Trainer API.

`DEFAULT_CONFIG` keeps RLlib 1.13's ES defaults. One training step: every ES `Worker`
evaluates antithetic pairs of perturbations `theta +/- noise_stdev * eps` of the flat
policy weights (one episode each; `eps` a slice of the shared noise table, named by its
index), until the step has `episodes_per_batch` episodes and `train_batch_size` steps.
The driver turns the returns into centred ranks, estimates the gradient
`g = sum_i (r_i+ - r_i-) eps_i / (2 n)` and takes an Adam step on
`-g + l2_coeff * theta`; then it merges the workers' observation-filter statistics and
sends the merged filter back. With probability `eval_prob` a worker runs an episode of
the unperturbed weights instead: the mean of those is the reported
`episode_reward_mean` (over the last `report_length` steps that had one).

Workers. `num_workers` ES `Worker`s run behind corral's worker handles (processes with
`backend="local"`, Ray actors with `backend="ray"`), each with its own env and policy
copy; with `num_workers: 0` one `Worker` runs in the driver. The driver also keeps a
local rollout worker (no sampling): its policy is the trained one, so acting,
evaluation workers, `get_policy` and checkpoints work as for any trainer.

The noise table. It is made once, in the driver, from a fixed seed (123, as RLlib's):
`noise_size` float32 values (1 GB at the default 250,000,000). Local workers are forked
after it exists, so they share its pages with the driver (copy-on-write, never written,
never copied); Ray actors get it through Ray's object store (`ray.put` once, read
zero-copy), as in RLlib. The gradient only needs the indices the workers report.

Episodes end when the env terminates or truncates it, or after `horizon` steps (or the
env spec's `max_episode_steps`, whichever is smaller).

Differences from RLlib 1.13: `num_workers: 0` is allowed (the driver evaluates the
perturbations); with a `seed`, worker `i` seeds its generators with `seed + i` (RLlib
seeds every worker alike, so they drew the same perturbations); a failed ES worker fails
the iteration (it is not recreated).
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch

from corral.agents.config import with_common_config
from corral.agents.es import optimizers, utils
from corral.agents.es.es_torch_policy import ESTorchPolicy
from corral.agents.trainer import NUM_AGENT_STEPS_SAMPLED, NUM_ENV_STEPS_SAMPLED, Trainer
from corral.core.learner import LearnerGroup
from corral.env.env_context import EnvContext
from corral.env.gym_compat import ensure_gymnasium_env
from corral.evaluation.backend import Future, wait_all
from corral.evaluation.worker_handle import WorkerSpec, start_worker, wait_all_ready
from corral.evaluation.worker_set import WORKER_START_TIMEOUT_S, WorkerSet
from corral.policy.policy import Policy
from corral.policy.sample_batch import DEFAULT_POLICY_ID
from corral.utils.config_spec import Float, Int, OneOf, Spec
from corral.utils.filter import Filter, FilterManager

logger = logging.getLogger(__name__)

# The seed of the shared noise table (RLlib's): every process derives the same table.
NOISE_SEED = 123
# Episodes never run longer than this when neither the env nor `horizon` cuts them.
MAX_TIMESTEP_LIMIT = 999_999


class Result(NamedTuple):
    """What one `Worker.do_rollouts` call returns (one entry per perturbation pair, or
    per evaluation episode)."""

    noise_indices: list[int]
    noisy_returns: list[list[float]]
    sign_noisy_returns: list[list[float]]
    noisy_lengths: list[list[int]]
    eval_returns: list[float]
    eval_lengths: list[int]


DEFAULT_CONFIG = with_common_config(
    {
        # Std of the Gaussian noise added to float Box actions in the perturbed episodes.
        "action_noise_std": 0.01,
        # L2 weight decay added to the gradient estimate: `-g + l2_coeff * theta`.
        "l2_coeff": 0.005,
        # Std of the weight perturbations (`theta +/- noise_stdev * eps`).
        "noise_stdev": 0.02,
        # Each step collects at least this many (perturbed) episodes ...
        "episodes_per_batch": 1000,
        # ... and at least this many env steps.
        "train_batch_size": 10000,
        # Probability that a worker runs an episode of the unperturbed weights (these
        # give the reported `episode_reward_mean`) instead of a perturbation pair.
        "eval_prob": 0.003,
        # How returns are shaped before the gradient estimate: "centered_rank" only.
        "return_proc_mode": "centered_rank",
        # ES workers (processes or Ray actors); 0: the driver evaluates the perturbations.
        "num_workers": 10,
        # Adam's step size.
        "stepsize": 0.01,
        # The policy's observation filter, its statistics merged from the workers.
        "observation_filter": "MeanStdFilter",
        # Floats in the shared noise table (float32: 4 bytes each).
        "noise_size": 250000000,
        # `episode_reward_mean` averages the evaluation returns of this many last steps.
        "report_length": 10,
        # ES sends the model's output to the env as it is; acting does the same.
        "normalize_actions": False,
        "clip_actions": False,
        # Evaluation workers act through the policy one env at a time (RLlib's setting).
        "evaluation_config": {"num_envs_per_worker": 1},
    }
)

# Type and range of ES's own keys (COMMON_CONFIG's are in COMMON_CONFIG_SPECS).
CONFIG_SPECS: dict[str, Spec] = {
    "action_noise_std": Float(0),
    "l2_coeff": Float(0),
    "noise_stdev": Float(0, lo_open=True),
    "episodes_per_batch": Int(0),
    "eval_prob": Float(0, 1),
    "return_proc_mode": OneOf("centered_rank"),
    "stepsize": Float(0, lo_open=True),
    "noise_size": Int(1, integral_float_ok=True),
    "report_length": Int(1),
}


def create_shared_noise(count: int) -> np.ndarray:
    """The shared noise table: `count` standard-normal float32 values from `NOISE_SEED`
    (drawn as float32 directly: no float64 copy of a table of gigabytes)."""
    return np.random.default_rng(NOISE_SEED).standard_normal(int(count), dtype=np.float32)


class SharedNoiseTable:
    """Read-only slices of the noise table: a perturbation is named by its start index.

    Args:
        noise: the float32 table (`create_shared_noise`).
    """

    def __init__(self, noise: np.ndarray) -> None:
        if noise.dtype != np.float32:
            raise TypeError(f"The noise table must be float32, got {noise.dtype}.")
        self.noise = noise

    def get(self, i: int, dim: int) -> np.ndarray:
        """The `dim` values from index `i` (a view)."""
        return self.noise[i : i + dim]

    def sample_index(self, dim: int, rng: np.random.Generator | None = None) -> int:
        """A random start index with `dim` values after it."""
        if dim > len(self.noise):
            raise ValueError(
                f"The noise table ({len(self.noise)} values, `noise_size`) is smaller than "
                f"the policy's {dim} weights: raise `noise_size`."
            )
        high = len(self.noise) - dim + 1
        return int(rng.integers(high) if rng is not None else np.random.randint(0, high))

    def get_delta(self, dim: int, rng: np.random.Generator | None = None) -> tuple[int, np.ndarray]:
        """A random index and its `dim` values."""
        idx = self.sample_index(dim, rng)
        return idx, self.get(idx, dim)


def rollout(
    policy: ESTorchPolicy,
    env: gym.Env,
    timestep_limit: int | None = None,
    add_noise: bool = False,
    offset: float = 0.0,
    seed: int | None = None,
) -> tuple[np.ndarray, int]:
    """Runs one episode with `policy`, updating its observation filter.

    Args:
        policy: acts through `compute_actions` (its own filter).
        env: a single-agent Gymnasium env.
        timestep_limit: cut the episode after this many steps (None: the env spec's
            `max_episode_steps`, else `MAX_TIMESTEP_LIMIT`; the smaller one when both).
        add_noise: add `action_noise_std` noise to the actions.
        offset: subtracted (as |offset|) from every reward, e.g. a survival bonus.
        seed: passed to `env.reset` (None: the env continues its own generator).

    Returns:
        (the rewards as float32, the episode length).
    """
    spec_limit = (
        getattr(getattr(env, "spec", None), "max_episode_steps", None) or MAX_TIMESTEP_LIMIT
    )
    limit = spec_limit if timestep_limit is None else min(timestep_limit, spec_limit)
    rewards = []
    # The env gets its own action structure (Tuple/Dict rebuilt from the flat row), Box
    # parts within their bounds (stretched from [-1, 1] first with `normalize_actions`).
    unsquash = bool(policy.config.get("normalize_actions"))
    obs, _ = env.reset(seed=seed)
    for _ in range(limit):
        actions, _, _ = policy.compute_actions([obs], add_noise=add_noise, update=True)
        action = policy.to_env_actions(actions, unsquash=unsquash, clip=True)[0]
        obs, reward, terminated, truncated, _ = env.step(action)
        rewards.append(float(reward) - abs(offset))
        if terminated or truncated:
            break
    return np.asarray(rewards, dtype=np.float32), len(rewards)


class Worker:
    """Evaluates perturbations of the flat weights on its own env (ES's remote worker).

    Served behind a worker handle (`handle.call("do_rollouts", theta)`), or called
    directly in the driver with `num_workers: 0`.

    Args:
        config: the trainer's config.
        policy_params: config keys to change for this worker's policy.
        env_creator: `fn(EnvContext) -> env`.
        noise: the noise table, or (Ray backend) an object ref to it.
        worker_index: 1..n (0: the driver's).
        min_task_runtime: one call keeps evaluating pairs for at least this many
            seconds (and at least one pair).
    """

    policy_class: type[ESTorchPolicy] = ESTorchPolicy

    def __init__(
        self,
        config: dict,
        policy_params: dict,
        env_creator: Callable[[EnvContext], Any],
        noise: Any,
        worker_index: int,
        min_task_runtime: float = 0.2,
    ) -> None:
        self.config = {**config, **policy_params}
        self.min_task_runtime = min_task_runtime
        self.worker_index = worker_index
        seed = self.config.get("seed")
        # Each worker its own stream: the same seed everywhere would draw the same noise.
        self._seed = None if seed is None else seed + worker_index
        if self._seed is not None:
            random.seed(self._seed)
            torch.manual_seed(self._seed)
        self._rng = np.random.default_rng(self._seed)
        self.noise = SharedNoiseTable(_resolve_noise(noise))
        # (An old gym API env is converted, as rollout workers convert theirs.)
        self.env = ensure_gymnasium_env(
            env_creator(
                EnvContext(
                    self.config.get("env_config") or {}, worker_index, remote=worker_index > 0
                )
            )
        )
        if not isinstance(self.env, gym.Env):
            raise ValueError(
                f"ES/ARS workers run single-agent Gymnasium envs; the env creator made a "
                f"{type(self.env).__name__}."
            )
        self.policy = self.policy_class(
            self.env.observation_space, self.env.action_space, self.config
        )
        self.policy.seed(self._seed)
        self._timestep_limit = self.config.get("horizon")

    @property
    def filters(self) -> dict[str, Filter]:
        return {DEFAULT_POLICY_ID: self.policy.observation_filter}

    def sync_filters(self, new_filters: dict[str, Filter]) -> None:
        """Takes over the driver's merged filter statistics."""
        for pid, f in self.filters.items():
            f.sync(new_filters[pid])

    def get_filters(self, flush_after: bool = False) -> dict[str, Filter]:
        """Copies of the filters; with `flush_after`, their buffers are then cleared."""
        out = {}
        for pid, f in self.filters.items():
            out[pid] = f.as_serializable()
            if flush_after:
                f.clear_buffer()
        return out

    def rollout(self, timestep_limit: int | None, add_noise: bool = True) -> tuple[np.ndarray, int]:
        """One episode of the current weights (see the module function `rollout`)."""
        seed, self._seed = self._seed, None  # (the first reset only: later ones continue)
        return rollout(
            self.policy,
            self.env,
            timestep_limit=timestep_limit,
            add_noise=add_noise,
            offset=self.config.get("offset", 0.0),
            seed=seed,
        )

    def do_rollouts(self, params: np.ndarray, timestep_limit: int | None = None) -> Result:
        """Evaluates perturbation pairs of `params` (and, with probability `eval_prob`,
        episodes of `params` itself) for at least `min_task_runtime` seconds."""
        if timestep_limit is None:
            timestep_limit = self._timestep_limit
        noise_indices: list[int] = []
        returns: list[list[float]] = []
        sign_returns: list[list[float]] = []
        lengths: list[list[int]] = []
        eval_returns: list[float] = []
        eval_lengths: list[int] = []
        start = time.monotonic()
        while not noise_indices or time.monotonic() - start < self.min_task_runtime:
            if self._rng.uniform() < self.config["eval_prob"]:
                self.policy.set_flat_weights(params)
                rewards, length = self.rollout(timestep_limit, add_noise=False)
                eval_returns.append(float(rewards.sum()))
                eval_lengths.append(length)
                continue
            index, eps = self.noise.get_delta(self.policy.num_params, self._rng)
            perturbation = self.config["noise_stdev"] * eps
            self.policy.set_flat_weights(params + perturbation)
            rewards_pos, length_pos = self.rollout(timestep_limit)
            self.policy.set_flat_weights(params - perturbation)
            rewards_neg, length_neg = self.rollout(timestep_limit)
            noise_indices.append(index)
            returns.append([float(rewards_pos.sum()), float(rewards_neg.sum())])
            sign_returns.append(
                [float(np.sign(rewards_pos).sum()), float(np.sign(rewards_neg).sum())]
            )
            lengths.append([length_pos, length_neg])
        return Result(noise_indices, returns, sign_returns, lengths, eval_returns, eval_lengths)

    def stop(self) -> None:
        """Closes the env (the handle calls this before the process ends)."""
        self.env.close()


def _resolve_noise(noise: Any) -> np.ndarray:
    """The table itself: an array as is; a Ray object ref read from the object store."""
    if isinstance(noise, np.ndarray):
        return noise
    import ray

    return ray.get(noise)


def _build_worker(factory: Callable[..., Worker], *args: Any) -> Worker:
    """Builds an ES worker inside its process (a module-level function: the Ray backend
    pickles the factory)."""
    return factory(*args)


class _DriverHandle:
    """A worker handle for the `Worker` of `num_workers: 0`: calls run at once, in the
    driver, and return done futures (so the training step has one code path)."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.worker_index = worker.worker_index

    def call(self, method: str, *args: Any, **kwargs: Any) -> Future:
        future = Future()
        future._set(getattr(self.worker, method)(*args, **kwargs))
        return future

    def stop(self, timeout: float = 2.0) -> None:
        self.worker.stop()


def get_policy_class(config: dict) -> type[Policy]:
    """ES's policy class (torch is corral's only framework)."""
    return ESTorchPolicy


class ESTrainer(Trainer):
    """Large-scale evolution strategies: antithetic weight perturbations, centred-rank
    returns, Adam on the estimated gradient."""

    _name = "ES"
    _default_config = DEFAULT_CONFIG
    _config_specs = CONFIG_SPECS
    _policy_class = ESTorchPolicy
    # Builds the ES workers with `Worker`'s arguments; how long one call lasts at least.
    _worker_factory: Callable[..., Worker] = Worker
    _min_task_runtime = 0.2

    def validate_config(self, config: dict) -> None:
        super().validate_config(config)
        name = self._name
        if config["num_gpus"] > 1:
            raise ValueError(f"`num_gpus` > 1 not yet supported for {name}!")
        if config.get("num_learners"):
            raise ValueError(f"{name} trains in the driver: `num_learners` must be 0.")
        if set(config["multiagent"]["policies"]) - {DEFAULT_POLICY_ID}:
            raise ValueError(
                f"{name} trains one single-agent policy: `multiagent.policies` must be empty."
            )

    def _make_workers(self, *, config: dict, num_workers: int, **kwargs: Any) -> WorkerSet:
        # The rollout worker set is the driver's alone: the ES workers are separate.
        if config is self.config:
            num_workers = 0
        return super()._make_workers(config=config, num_workers=num_workers, **kwargs)

    def setup(self, config: dict) -> None:
        super().setup(config)
        local = self.workers.local_worker()
        self.policy: ESTorchPolicy = local.get_policy()  # type: ignore[assignment]
        # One filter: the policy's, which the local worker applies when acting.
        local.filters[DEFAULT_POLICY_ID] = self.policy.observation_filter
        self.optimizer = self._make_optimizer()
        self.report_length = self.config["report_length"]
        self.episodes_so_far = 0
        self.reward_list: list[float] = []
        self._last_info: dict = {}
        self._last_eval_lengths: np.ndarray = np.zeros(0, dtype=np.int64)
        self._last_episodes = 0
        logger.info("Creating shared noise table.")
        self.noise = SharedNoiseTable(create_shared_noise(self.config["noise_size"]))
        self._es_workers = self._start_es_workers()

    def _make_optimizer(self) -> optimizers.Optimizer:
        return optimizers.Adam(self.policy, self.config["stepsize"])

    def _start_es_workers(self) -> list[Any]:
        config = self.config
        args: tuple[Any, ...] = (config, {}, self.env_creator)
        n = config["num_workers"]
        if n == 0:
            worker = self._worker_factory(*args, self.noise.noise, 0, self._min_task_runtime)
            return [_DriverHandle(worker)]
        backend = config.get("backend", "local")
        noise: Any = self.noise.noise
        if backend == "ray":
            import ray

            noise = ray.put(noise)
        handles = []
        for index in range(1, n + 1):
            spec = WorkerSpec(
                index,
                functools.partial(
                    _build_worker, self._worker_factory, *args, noise, index, self._min_task_runtime
                ),
                config.get("extra_python_environs_for_worker") or {},
                max(1, int(config.get("num_cpus_per_worker", 1) or 1)),
                self.workers.sample_timeout_s,
            )
            handles.append(
                start_worker(spec, backend, resources={"num_cpus": config["num_cpus_per_worker"]})
            )
        wait_all_ready(handles, WORKER_START_TIMEOUT_S)
        return handles

    @property
    def learner_group(self) -> LearnerGroup:
        """An empty learner group: ES steps the weights itself (its numpy optimiser)."""
        if self._learner_group is None:
            local = self.workers.local_worker()
            self._learner_group = LearnerGroup(
                self.config, local.policy_map, self.callbacks, policy_ids=[]
            )
        return self._learner_group

    def get_policy(self, policy_id: str = DEFAULT_POLICY_ID) -> ESTorchPolicy:
        if policy_id != DEFAULT_POLICY_ID:
            raise ValueError(
                f"{self._name} has no policy '{policy_id}'! Use {DEFAULT_POLICY_ID} instead."
            )
        return self.policy

    # -- training -----------------------------------------------------------

    def _collection_target(self) -> tuple[int, int]:
        """(min episodes, min env steps) of one step's perturbed episodes."""
        return self.config["episodes_per_batch"], self.config["train_batch_size"]

    def _collect_results(self, theta: np.ndarray) -> tuple[list[Result], int, int]:
        """Rounds of `do_rollouts` on every worker until the step's target is met."""
        min_episodes, min_timesteps = self._collection_target()
        results: list[Result] = []
        num_episodes = num_timesteps = 0
        while num_episodes < min_episodes or num_timesteps < min_timesteps:
            for result in wait_all([w.call("do_rollouts", theta) for w in self._es_workers]):
                results.append(result)
                num_episodes += sum(len(pair) for pair in result.noisy_lengths)
                num_timesteps += sum(sum(pair) for pair in result.noisy_lengths)
        return results, num_episodes, num_timesteps

    def _step_direction(
        self, noise_indices: np.ndarray, noisy_returns: np.ndarray, theta: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(the gradient estimate g, the direction the optimiser descends).

        ES: centred ranks `R`, `g = sum_i (R_i+ - R_i-) eps_i / (2 n)` (the
        antithetic estimate of the gradient of the smoothed return, Salimans et al.
        eq. 1 with mirrored sampling), descended as `-g + l2_coeff * theta`.
        """
        proc = utils.compute_centered_ranks(noisy_returns)
        g, _ = utils.batched_weighted_sum(
            proc[:, 0] - proc[:, 1],
            (self.noise.get(i, self.policy.num_params) for i in noise_indices),
            batch_size=500,
        )
        g = np.asarray(g, np.float32) / noisy_returns.size
        return g, -g + self.config["l2_coeff"] * theta

    def training_step(self) -> dict:
        """One ES step: perturbed episodes on the workers, one optimiser step, filters
        merged. Returns an empty learner info (ES's statistics go to `info`)."""
        theta = self.policy.get_flat_weights()
        results, num_episodes, _ = self._collect_results(theta)
        noise_indices = np.array([i for r in results for i in r.noise_indices], dtype=np.int64)
        noisy_returns = np.array([x for r in results for x in r.noisy_returns], dtype=np.float32)
        noisy_lengths = np.array([x for r in results for x in r.noisy_lengths], dtype=np.int64)
        eval_returns = [x for r in results for x in r.eval_returns]
        eval_lengths = np.array([x for r in results for x in r.eval_lengths], dtype=np.int64)
        self.episodes_so_far += num_episodes

        g, direction = self._step_direction(noise_indices, noisy_returns, theta)
        theta, update_ratio = self.optimizer.update(direction)
        self.policy.set_flat_weights(theta)
        self.policy.bump_weights_seq()
        if eval_returns:
            self.reward_list.append(float(np.mean(eval_returns)))
        FilterManager.synchronize(
            {DEFAULT_POLICY_ID: self.policy.observation_filter}, self._es_workers
        )

        steps = int(noisy_lengths.sum())
        self._counters[NUM_ENV_STEPS_SAMPLED] += steps
        self._counters[NUM_AGENT_STEPS_SAMPLED] += steps
        self._last_eval_lengths = eval_lengths
        self._last_episodes = int(noisy_lengths.size)
        self._last_info = {
            "weights_norm": float(np.square(theta).sum()),
            "weights_std": float(np.std(theta)),
            "grad_norm": float(np.square(g).sum()),
            "update_ratio": update_ratio,
            "episodes_this_iter": int(noisy_lengths.size),
            "episodes_so_far": self.episodes_so_far,
        }
        return {}

    def _compile_results(self, learner_info: dict, steps_this_iter: int) -> dict:
        result = super()._compile_results(learner_info, steps_this_iter)
        recent = self.reward_list[-self.report_length :]
        lengths = self._last_eval_lengths
        self._episodes_total = (self._episodes_total or 0) + self._last_episodes
        result.update(
            episode_reward_mean=float(np.mean(recent)) if recent else float("nan"),
            episode_len_mean=float(lengths.mean()) if lengths.size else float("nan"),
            episodes_this_iter=self._last_episodes,
            episodes_total=self._episodes_total,
        )
        result["info"].update(self._last_info)
        return result

    # -- checkpoints --------------------------------------------------------

    def _extra_checkpoint_state(self) -> dict:
        return {
            "optimizer": self.optimizer.get_state(),
            "episodes_so_far": self.episodes_so_far,
            "reward_list": list(self.reward_list),
        }

    def _set_extra_checkpoint_state(self, state: dict) -> None:
        self.optimizer.set_state(state["optimizer"])
        self.episodes_so_far = int(state["episodes_so_far"])
        self.reward_list = [float(r) for r in state["reward_list"]]

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        # The restored filter statistics reach the ES workers too.
        merged = {DEFAULT_POLICY_ID: self.policy.observation_filter.as_serializable()}
        wait_all([w.call("sync_filters", merged) for w in self._es_workers])

    def cleanup(self) -> None:
        for handle in getattr(self, "_es_workers", []):
            handle.stop()
        super().cleanup()


__all__ = [
    "DEFAULT_CONFIG",
    "ESTrainer",
    "Result",
    "SharedNoiseTable",
    "Worker",
    "create_shared_noise",
    "get_policy_class",
    "rollout",
]
