"""Dreamer (Hafner et al. 2020) through the classic Trainer API: RLlib 1.13's `DREAMERTrainer`.

"Dream to Control: Learning Behaviors by Latent Imagination" (ICLR, arXiv:1912.01603).
Dreamer learns a world model of image observations (PlaNet's RSSM, `dreamer_model.py`) and
learns its actor and value network on trajectories imagined in that model's latent space
(`dreamer_torch_policy.py`).

One training step (RLlib 1.13's `execution_plan`, one `DreamerIteration`):

- first, until the episode buffer holds `prefill_timesteps` env frames, sample complete
  episodes; the policy acts uniformly at random for the trainer's first
  `prefill_timesteps` frames (a restored trainer refills its empty buffer with its
  restored policy instead);
- sample complete episodes (at least `rollout_fragment_length` env steps), acting with the
  actor plus Gaussian noise (`explore_noise`);
- take `dreamer_train_iters` gradient steps, each on `batch_size` chunks of `batch_length`
  consecutive steps drawn uniformly from the stored episodes (`EpisodicBuffer`);
- add the new episodes to the buffer (which keeps the last 1000 episodes).

Timesteps count env frames, as RLlib 1.13's Dreamer counts them: each env step is
`action_repeat` frames, the env's `env_config["frame_skip"]` (dm_control's tasks repeat
each action `frame_skip` times, `corral.env.dm_control_suite`). So `prefill_timesteps`,
`timesteps_total` and `horizon` are in frames (the sampler cuts episodes after
`horizon // action_repeat` env steps).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from corral.agents.config import with_common_config
from corral.agents.dreamer.dreamer_model import DreamerModel
from corral.agents.dreamer.dreamer_torch_policy import (
    LOG_GIF,
    DreamerTorchPolicy,
    preprocess_episode,
)
from corral.agents.trainer import Trainer
from corral.evaluation.worker_set import WorkerSet
from corral.execution.common import NUM_AGENT_STEPS_SAMPLED, NUM_ENV_STEPS_SAMPLED
from corral.execution.rollout_ops import synchronous_parallel_sample
from corral.execution.train_ops import learner_results_per_iteration, update_learners
from corral.policy.policy import Policy
from corral.policy.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch
from corral.utils import config_spec as cs
from corral.utils.metrics.learner_info import LEARNER_STATS_KEY
from corral.utils.numpy import convert_to_numpy

DEFAULT_CONFIG = with_common_config(
    {
        # === Learning rates and optimisation ===
        # Learning rate of the world model (encoder, decoder, reward head, RSSM): PlaNet's.
        "td_model_lr": 6e-4,
        # Learning rate of the actor.
        "actor_lr": 8e-5,
        # Learning rate of the value network (the critic).
        "critic_lr": 8e-5,
        # Clip each network's gradients (world model, actor, critic) to this global norm.
        "grad_clip": 100.0,
        # Discount of the imagined rewards.
        "discount": 0.99,
        # Lambda of the lambda-returns the actor maximises and the critic regresses on.
        "lambda": 0.95,
        # The actor's tanh keeps the actions in bounds: clipping must stay off.
        "clip_actions": False,
        # Gradient steps per sampled rollout, each on a fresh batch of chunks.
        "dreamer_train_iters": 100,
        # Maximum episode length in env frames (cut after horizon // action_repeat env
        # steps): 1000 for dm_control's tasks.
        "horizon": 1000,
        # Chunks (sequences) per gradient step.
        "batch_size": 50,
        # Steps per chunk; episodes shorter than this are never drawn.
        "batch_length": 50,
        # Imagined steps per start state for the actor and critic losses (>= 2).
        "imagine_horizon": 15,
        # The KL term of the world-model loss is raised to at least this (free nats).
        "free_nats": 3.0,
        # Weight of the KL term of the world-model loss.
        "kl_coeff": 1.0,
        # Distributed Dreamer is not built: sampling runs in the driver.
        "num_workers": 0,
        # Env frames sampled (and stored) before the first gradient step; the policy acts
        # uniformly at random for the trainer's first this many frames.
        "prefill_timesteps": 5000,
        # Envs per worker (1 keeps Dreamer's sample efficiency).
        "num_envs_per_worker": 1,
        # Std of the Gaussian noise added to the actor's actions while exploring.
        "explore_noise": 0.3,
        # The buffer stores whole episodes: sampling must return complete ones.
        "batch_mode": "complete_episodes",
        # Dreamer's networks (see `DreamerModel`).
        "dreamer_model": {
            # The model class (or a name registered with `ModelCatalog.register_custom_model`).
            "custom_model": DreamerModel,
            # Size of the RSSM's deterministic state h (and of its dense layers).
            "deter_size": 200,
            # Size of the RSSM's stochastic state z.
            "stoch_size": 30,
            # Channels of the first conv layer of the encoder (and the last of the decoder).
            "depth_size": 32,
            # Units of the hidden layers of the reward head, the value network and the actor.
            "hidden_size": 400,
            # The actor's Gaussian std (before the tanh) for zero network outputs.
            "action_init_std": 5.0,
        },
        "env_config": {
            # The env repeats each action this many frames (dm_control's `frame_skip`): the
            # trainer's `action_repeat`.
            "frame_skip": 2,
        },
    }
)

_LR = cs.Float(0, lo_open=True)

# Type and range of Dreamer's own keys (COMMON_CONFIG's are in COMMON_CONFIG_SPECS),
# checked when the trainer is built.
CONFIG_SPECS = {
    "td_model_lr": _LR,
    "actor_lr": _LR,
    "critic_lr": _LR,
    "grad_clip": cs.Optional(cs.Float(0)),
    "discount": cs.Float(0, 1),
    "lambda": cs.Float(0, 1),
    "dreamer_train_iters": cs.Int(1),
    "batch_size": cs.Int(1),
    "batch_length": cs.Int(1),
    "imagine_horizon": cs.Int(2),
    "free_nats": cs.Float(0),
    "kl_coeff": cs.Float(0),
    "prefill_timesteps": cs.Int(0, integral_float_ok=True),
    "explore_noise": cs.Float(0),
    "dreamer_model": cs.Dict(
        {
            "custom_model": cs.AnyOf(cs.Str(), cs.CallableSpec("a model class")),
            "deter_size": cs.Int(1),
            "stoch_size": cs.Int(1),
            "depth_size": cs.Int(1),
            "hidden_size": cs.Int(1),
            "action_init_std": cs.Float(0, lo_open=True),
        },
        what="a dict of Dreamer's network sizes",
    ),
}


def action_repeat(config: dict) -> int:
    """Env frames per env step: the env's `env_config["frame_skip"]` (1 without one)."""
    return int((config.get("env_config") or {}).get("frame_skip", 1) or 1)


class EpisodicBuffer:
    """The last `max_length` episodes, each as (o_t, a_{t-1}, r_{t-1}) rows
    (`preprocess_episode`); samples chunks of `length` consecutive steps.

    Args:
        max_length: episodes kept (the oldest are dropped beyond).
        length: steps per sampled chunk.
        seed: seed of the chunks' draws (None: unseeded).
    """

    def __init__(self, max_length: int = 1000, length: int = 50, seed: int | None = None) -> None:
        self.episodes: list[SampleBatch] = []
        self.max_length = max_length
        # Env steps added over the buffer's lifetime.
        self.timesteps = 0
        self.length = length
        self._rng = np.random.default_rng(seed)

    def add(self, batch: SampleBatch) -> None:
        """Splits a sampled batch of complete episodes into its episodes and stores each
        (the oldest ones beyond `max_length` are dropped)."""
        self.timesteps += batch.count
        self.episodes.extend(preprocess_episode(None, e) for e in batch.split_by_episode())
        if len(self.episodes) > self.max_length:
            del self.episodes[: len(self.episodes) - self.max_length]

    def sample(self, batch_size: int) -> SampleBatch:
        """`batch_size` chunks, each from an episode drawn uniformly among those with at
        least `length` rows, starting at a uniformly drawn step: columns `obs`,
        `actions`, `rewards` of shape `[batch_size, length, ...]`.

        Raises:
            ValueError: no stored episode has `length` rows.
        """
        long_enough = [e for e in self.episodes if e.count >= self.length]
        if not long_enough:
            longest = max((e.count for e in self.episodes), default=0)
            raise ValueError(
                f"Dreamer: no stored episode has batch_length={self.length} steps (the "
                f"longest has {longest}, counting its reset observation); lower "
                "`batch_length` or let the episodes run longer."
            )
        chunks = []
        for i in self._rng.integers(len(long_enough), size=batch_size):
            episode = long_enough[i]
            start = int(self._rng.integers(episode.count - self.length + 1))
            chunks.append(episode[start : start + self.length])
        columns = (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.REWARDS)
        return SampleBatch({k: np.stack([c[k] for c in chunks]) for k in columns})


def total_sampled_timesteps(worker: Any) -> int:
    """The env frames the worker's default policy was told were sampled so far (its
    global timestep, which the trainer keeps at its frame count)."""
    return int(worker.policy_map[DEFAULT_POLICY_ID].global_timestep)


class DreamerIteration:
    """One Dreamer training round on a sampled batch: `dreamer_train_iters` gradient steps,
    each on `batch_size` chunks from the episode buffer, then the batch's episodes go
    into the buffer.

    Args:
        worker: the local rollout worker (its `learn_on_batch` trains by default).
        episode_buffer: the `EpisodicBuffer`.
        dreamer_train_iters: gradient steps per call.
        batch_size: chunks per gradient step.
        act_repeat: env frames per env step.
        learn: `fn(batch of chunks) -> learner info` of one gradient step
            (``{policy_id: {"learner_stats": ...}}``, or None when `train()` reduces the
            learners' results at the iteration's end; default: the worker's
            `learn_on_batch`).
    """

    def __init__(
        self,
        worker: Any,
        episode_buffer: EpisodicBuffer,
        dreamer_train_iters: int,
        batch_size: int,
        act_repeat: int,
        learn: Callable[[SampleBatch], Any] | None = None,
    ) -> None:
        self.worker = worker
        self.episode_buffer = episode_buffer
        self.dreamer_train_iters = dreamer_train_iters
        self.repeat = act_repeat
        self.batch_size = batch_size
        self.learn = learn or worker.learn_on_batch

    def __call__(self, samples: SampleBatch | MultiAgentBatch) -> Any:
        """Trains, stores `samples`; returns the last gradient step's learner info, with
        the video summary its loss made (`log_gif`, if any) as `postprocess_gif` lays it
        out."""
        fetches = None
        for _ in range(self.dreamer_train_iters):
            fetches = self.learn(self.episode_buffer.sample(self.batch_size))
        if fetches:
            stats = self.policy_stats(fetches)
            if LOG_GIF in stats:
                stats[LOG_GIF] = self.postprocess_gif(stats[LOG_GIF])
        self.episode_buffer.add(_policy_batch(samples))
        return fetches

    def postprocess_gif(self, gif: Any) -> np.ndarray:
        """A video summary ``[B, T, C, H, W]`` with values in [0, 1] (`log_summary`'s) as
        one video ``[1, T, C, H, B * W]`` of uint8 (values times 255, clipped to
        0..255): the B videos side by side along the width.

        Args:
            gif: the videos (array or tensor).
        """
        frames = np.clip(255 * convert_to_numpy(gif), 0, 255).astype(np.uint8)
        b, t, c, h, w = frames.shape
        return frames.transpose(1, 2, 3, 0, 4).reshape(1, t, c, h, b * w)

    def policy_stats(self, fetches: dict) -> dict:
        """The default policy's learner stats in a learner info dict (`fetches`, as
        `learn_on_batch` returns it); the dict itself, so that changing it changes
        `fetches`."""
        return fetches[DEFAULT_POLICY_ID][LEARNER_STATS_KEY]


def _policy_batch(samples: SampleBatch | MultiAgentBatch) -> SampleBatch:
    """The default policy's rows of a sampled batch."""
    if isinstance(samples, MultiAgentBatch):
        return samples.policy_batches[DEFAULT_POLICY_ID]
    return samples


def _single_policy(config: Mapping[str, Any]) -> bool:
    policies = (config.get("multiagent") or {}).get("policies") or {}
    return set(policies) <= {DEFAULT_POLICY_ID}


class DREAMERTrainer(Trainer):
    """Dreamer: a world model of image observations, an actor and a value network learnt
    on imagined trajectories (Hafner et al. 2020, arXiv:1912.01603). Image observations
    (3-D Box) and 1-D Box actions."""

    _name = "DREAMER"
    _default_config = DEFAULT_CONFIG
    _config_specs = CONFIG_SPECS
    _policy_class = DreamerTorchPolicy
    _config_rules: tuple[cs.Rule, ...] = (
        cs.Rule(
            lambda c: c["num_workers"] == 0,
            "Distributed Dreamer is not built: num_workers must be 0, got {num_workers}.",
        ),
        cs.Rule(
            lambda c: c.get("num_learners", 0) == 0,
            "Dreamer trains in the driver: num_learners must be 0, got {num_learners}.",
        ),
        cs.Rule(
            lambda c: c["num_gpus"] <= 1,
            "Dreamer trains on one device: num_gpus must be <= 1, got {num_gpus}.",
        ),
        cs.Rule(
            lambda c: c["batch_mode"] == "complete_episodes",
            "Dreamer stores whole episodes: batch_mode must be 'complete_episodes', got "
            "{batch_mode!r}.",
        ),
        cs.Rule(
            lambda c: not c["clip_actions"],
            "Dreamer's actor squashes its actions into bounds with tanh: clip_actions must "
            "be False.",
        ),
        cs.Rule(
            lambda c: _single_policy(c),
            "Dreamer trains one policy ('default_policy'); multiagent.policies "
            "{multiagent[policies]} names others.",
        ),
        cs.Rule(
            lambda c: _valid_frame_skip((c.get("env_config") or {}).get("frame_skip", 1)),
            "env_config.frame_skip (Dreamer's action_repeat) must be an int >= 1, got "
            "{env_config[frame_skip]!r}.",
        ),
    )

    def validate_config(self, config: dict) -> None:
        super().validate_config(config)
        cs.check_rules(config, type(self))

    def setup(self, config: dict) -> None:
        super().setup(config)
        cfg = self.config
        self.action_repeat = action_repeat(cfg)
        self.episode_buffer = EpisodicBuffer(length=cfg["batch_length"], seed=cfg.get("seed"))
        self.dreamer_iteration = DreamerIteration(
            self.workers.local_worker(),
            self.episode_buffer,
            cfg["dreamer_train_iters"],
            cfg["batch_size"],
            self.action_repeat,
            learn=self._learn,
        )

    def _make_workers(
        self,
        *,
        env_creator: Callable,
        validate_env: Callable | None,
        policy_class: type[Policy] | None,
        config: dict,
        num_workers: int,
    ) -> WorkerSet:
        """The workers cut episodes after `horizon // action_repeat` env steps (the
        config's `horizon` counts frames)."""
        horizon = config.get("horizon")
        if horizon:
            config = {**config, "horizon": max(1, int(horizon) // action_repeat(config))}
        return super()._make_workers(
            env_creator=env_creator,
            validate_env=validate_env,
            policy_class=policy_class,
            config=config,
            num_workers=num_workers,
        )

    @learner_results_per_iteration
    def training_step(self) -> dict:
        while self.episode_buffer.timesteps * self.action_repeat < self.config["prefill_timesteps"]:
            self.episode_buffer.add(_policy_batch(self._sample()))
        self.dreamer_iteration(self._sample())
        return {}

    def _sample(self) -> SampleBatch | MultiAgentBatch:
        """Samples complete episodes, counts their frames and tells the policy the frame
        count (its global timestep, which ends the random prefill)."""
        batch = synchronous_parallel_sample(self.workers)
        self._counters[NUM_ENV_STEPS_SAMPLED] += batch.env_steps() * self.action_repeat
        self._counters[NUM_AGENT_STEPS_SAMPLED] += batch.agent_steps() * self.action_repeat
        self.workers.sync_weights(global_vars={"timestep": self._counters[NUM_ENV_STEPS_SAMPLED]})
        return batch

    def _learn(self, chunks: SampleBatch) -> Any:
        """One gradient step on a batch of chunks through the learners (its rows are the
        chunks; it counts as their steps trained)."""
        batch = MultiAgentBatch(
            {DEFAULT_POLICY_ID: chunks}, chunks.count * self.episode_buffer.length
        )
        results = update_learners(self, batch)
        return None if results is None else self.learner_info_from(results)


def _valid_frame_skip(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and bool(value >= 1)


__all__ = [
    "DEFAULT_CONFIG",
    "DREAMERTrainer",
    "DreamerIteration",
    "EpisodicBuffer",
    "total_sampled_timesteps",
]
