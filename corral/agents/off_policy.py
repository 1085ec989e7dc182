"""The replay-based training step shared by SAC, DDPG and TD3.

One `training_step`: sample one fragment per worker (`rollout_fragment_length`
x `num_envs_per_worker` env steps each), add it to the replay buffer, and, once
`learning_starts` env steps were sampled, run as many gradient steps as
`training_intensity` asks for, all in one `Learner.update` call over a block of
`k x train_batch_size` replayed rows (minibatches of `train_batch_size`). That
keeps RLlib 1.x's ratio of trained to sampled steps while paying the per-call
overhead (buffer sampling, numpy -> torch, metrics, weight sync) once per block
instead of once per gradient step. With `rollout_fragment_length: 64` and
`training_intensity: train_batch_size`, 64 env steps are followed by 64
gradient steps: one per env step, as in Haarnoja et al.'s SAC.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from corral.agents.trainer import (
    NUM_AGENT_STEPS_SAMPLED,
    NUM_AGENT_STEPS_TRAINED,
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_TRAINED,
    Trainer,
)
from corral.execution import synchronous_parallel_sample
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch
from corral.utils.config_spec import (
    AnyOf,
    Bool,
    CallableSpec,
    Dict,
    Float,
    Int,
    OneOf,
    Optional,
    Str,
)
from corral.utils.deprecation import DEPRECATED_VALUE
from corral.utils.replay_buffers import BATCH_INDEXES, N_STEP, WEIGHTS, MultiAgentReplayBuffer

# Importance-sampling weights of prioritized replay (RLlib's column name).
PRIO_WEIGHTS = WEIGHTS

# Transition columns kept in the replay buffer (the rest of a sample batch is dropped).
REPLAY_COLUMNS = (
    SampleBatch.OBS,
    SampleBatch.ACTIONS,
    SampleBatch.REWARDS,
    SampleBatch.NEXT_OBS,
    SampleBatch.TERMINATEDS,
    N_STEP,
)
# Kept as well in lockstep replay mode: they group the rows into env steps.
LOCKSTEP_COLUMNS = (SampleBatch.EPS_ID, SampleBatch.T)
LAST_TARGET_UPDATE_TS = "last_target_update_ts"
NUM_TARGET_UPDATES = "num_target_updates"

# Buffer sizes and step counts are cast with int(), so 1e6 is fine.
_COUNT = Int(0, integral_float_ok=True)

# Type and range of the replay keys every off-policy algorithm has (its own keys
# are in its `CONFIG_SPECS`), checked when the trainer is built.
REPLAY_CONFIG_SPECS = {
    "buffer_size": AnyOf(OneOf(DEPRECATED_VALUE), Int(1, integral_float_ok=True)),
    "replay_buffer_config": Dict(
        {
            "type": AnyOf(Str(), CallableSpec("a replay buffer class")),
            "capacity": Int(1, integral_float_ok=True),
        },
        what='a dict {"type": ..., "capacity": ...}',
    ),
    "store_buffer_in_checkpoints": Bool(),
    "prioritized_replay": Bool(),
    # Schaul et al. 2016: alpha in [0, 1] (0: uniform, 1: fully prioritized) and the
    # importance exponent beta in [0, 1]; beyond, p^alpha and (N P)^-beta under- or
    # overflow float64 for ordinary priorities. eps > 0 keeps every priority > 0.
    "prioritized_replay_alpha": Float(0, 1),
    "prioritized_replay_beta": Float(0, 1),
    "final_prioritized_replay_beta": Float(0, 1),
    "prioritized_replay_beta_annealing_timesteps": _COUNT,
    "prioritized_replay_eps": Float(0, lo_open=True),
    "training_intensity": Optional(Float(0, lo_open=True)),
    "learning_starts": _COUNT,
    "target_network_update_freq": _COUNT,
    "worker_side_prioritization": Bool(),
    "grad_clip": Optional(Float(0)),
    "n_step": Int(1),
}


class OffPolicyTrainer(Trainer):
    """A trainer that learns from a replay buffer of its own past transitions.

    Config keys read (RLlib 1.x's names): `replay_buffer_config` (`capacity`),
    `buffer_size` (deprecated alias of the capacity), `prioritized_replay`
    (+ `_alpha`, `_beta`, `_eps`), `learning_starts`, `train_batch_size`,
    `training_intensity`, `target_network_update_freq`, `tau`,
    `multiagent.replay_mode` ("independent" or "lockstep").
    """

    _config_specs = REPLAY_CONFIG_SPECS

    def setup(self, config: dict) -> None:
        super().setup(config)
        cfg = self.config
        self.local_replay_buffer = make_replay_buffer(cfg)
        self._train_credit = 0.0
        self._last_learner_info: dict = {}

    def validate_config(self, config: dict) -> None:
        super().validate_config(config)
        if config.get("training_intensity") is not None and config["training_intensity"] <= 0:
            raise ValueError(
                f"`training_intensity` must be > 0 or None, got {config['training_intensity']}."
            )

    def _extra_checkpoint_state(self) -> dict:
        """The replay buffer (when `store_buffer_in_checkpoints`) and the train credit."""
        state: dict = {"train_credit": self._train_credit}
        if self.config.get("store_buffer_in_checkpoints"):
            state["replay_buffer"] = self.local_replay_buffer.get_state()
        return state

    def _set_extra_checkpoint_state(self, state: dict) -> None:
        self._train_credit = float(state.get("train_credit", 0.0))
        if "replay_buffer" in state and self.config.get("store_buffer_in_checkpoints"):
            self.local_replay_buffer.set_state(state["replay_buffer"])

    def updates_per_env_step(self) -> float:
        """Gradient steps per sampled env step.

        `training_intensity` is RLlib's ratio of trained rows to sampled env
        steps; without it, one train batch per sampled fragment round.
        """
        cfg = self.config
        intensity = cfg.get("training_intensity")
        if intensity:
            return float(intensity) / cfg["train_batch_size"]
        per_round = (
            cfg["rollout_fragment_length"] * cfg["num_envs_per_worker"] * max(cfg["num_workers"], 1)
        )
        return 1.0 / per_round

    def training_step(self) -> dict:
        cfg = self.config
        batch = synchronous_parallel_sample(self.workers)
        self._counters[NUM_ENV_STEPS_SAMPLED] += batch.env_steps()
        self._counters[NUM_AGENT_STEPS_SAMPLED] += batch.agent_steps()
        lockstep = self.local_replay_buffer.replay_mode == "lockstep"
        self.local_replay_buffer.add(_transitions(batch, LOCKSTEP_COLUMNS if lockstep else ()))
        if self._counters[NUM_ENV_STEPS_SAMPLED] < cfg["learning_starts"]:
            return self._last_learner_info

        self._train_credit += batch.env_steps() * self.updates_per_env_step()
        num_updates = int(self._train_credit)
        self._train_credit -= num_updates
        if num_updates == 0:
            return self._last_learner_info
        tbs = cfg["train_batch_size"]
        if cfg["prioritized_replay"]:
            self.local_replay_buffer.beta = self._annealed_beta()
        train_batch = self.local_replay_buffer.sample(num_updates * tbs)
        if cfg["prioritized_replay"]:
            self._start_td_error_logs(train_batch)
        results = self.learner_group.update(
            batch=train_batch,
            minibatch_size=tbs,
            num_epochs=1,
            shuffle_batch_per_epoch=False,
            timesteps={"num_env_steps_sampled_lifetime": self._counters[NUM_ENV_STEPS_SAMPLED]},
        )
        self._counters[NUM_ENV_STEPS_TRAINED] += train_batch.env_steps()
        self._counters[NUM_AGENT_STEPS_TRAINED] += train_batch.agent_steps()
        if cfg["prioritized_replay"]:
            self._update_priorities(train_batch)
        self._maybe_update_targets()
        self.workers.sync_weights(global_vars={"timestep": self._counters[NUM_ENV_STEPS_SAMPLED]})
        self._last_learner_info = self.learner_info_from(results)
        return self._last_learner_info

    def _annealed_beta(self) -> float:
        """Importance-sampling exponent, linear from `prioritized_replay_beta` to
        `final_prioritized_replay_beta` over `..._beta_annealing_timesteps` steps."""
        cfg = self.config
        start, end = cfg["prioritized_replay_beta"], cfg["final_prioritized_replay_beta"]
        horizon = max(1, cfg["prioritized_replay_beta_annealing_timesteps"])
        frac = min(1.0, self._counters[NUM_ENV_STEPS_SAMPLED] / horizon)
        return start + frac * (end - start)

    def _start_td_error_logs(self, train_batch: MultiAgentBatch) -> None:
        """Asks each policy that can (`start_td_error_log`) to keep its losses' TD errors."""
        local = self.workers.local_worker()
        for pid in train_batch.policy_batches:
            start = getattr(local.get_policy(pid), "start_td_error_log", None)
            if start is not None:
                start()

    def _update_priorities(self, train_batch: MultiAgentBatch) -> None:
        """New priorities from the TD errors of the update's own losses (one per
        trained row, as RLlib 1.x's `td_error` fetch); where a policy logged none, not
        one per row or a non-finite one (a skipped minibatch), from `compute_td_error`."""
        local = self.workers.local_worker()
        updates = {}
        for pid, policy_batch in train_batch.policy_batches.items():
            if not local.is_policy_to_train(pid, train_batch):
                continue  # not trained here (e.g. another trainer's policy): no TD errors
            policy = local.get_policy(pid)
            pop = getattr(policy, "pop_td_errors", None)
            td_error = pop() if pop is not None else None
            if (
                td_error is None
                or len(td_error) != policy_batch.count
                or not np.isfinite(td_error).all()  # from a minibatch that was skipped
            ):
                td_error = policy.compute_td_error(policy_batch)
            updates[pid] = (policy_batch[BATCH_INDEXES], td_error)
        self.local_replay_buffer.update_priorities(updates)

    def _maybe_update_targets(self) -> None:
        """Hard/soft target updates every `target_network_update_freq` sampled steps
        (0: the policy moves its targets by `tau` after each gradient step)."""
        freq = self.config.get("target_network_update_freq") or 0
        sampled = self._counters[NUM_ENV_STEPS_SAMPLED]
        if freq and sampled - self._counters[LAST_TARGET_UPDATE_TS] >= freq:
            self.workers.local_worker().foreach_trainable_policy(
                lambda p, _pid: p.update_target(self.config["tau"])
            )
            self._counters[NUM_TARGET_UPDATES] += 1
            self._counters[LAST_TARGET_UPDATE_TS] = sampled


def make_replay_buffer(config: dict) -> Any:
    """The `MultiAgentReplayBuffer` described by `replay_buffer_config` (and the
    top-level `prioritized_replay*` keys) and `multiagent.replay_mode`.

    Raises:
        ValueError: lockstep replay with prioritized replay (as in RLlib).
    """
    buffer_config = dict(config.get("replay_buffer_config") or {})
    capacity = buffer_config.get("capacity") or config.get("buffer_size")
    return MultiAgentReplayBuffer(
        capacity=int(capacity),
        prioritized=bool(config["prioritized_replay"]),
        alpha=config["prioritized_replay_alpha"],
        beta=config["prioritized_replay_beta"],
        eps=config["prioritized_replay_eps"],
        seed=config.get("seed"),
        replay_mode=(config.get("multiagent") or {}).get("replay_mode") or "independent",
    )


def _transitions(
    batch: SampleBatch | MultiAgentBatch, extra_columns: tuple[str, ...] = ()
) -> SampleBatch | MultiAgentBatch:
    """Only the columns a Q-learner needs: (s, a, r, s', terminated), plus `extra_columns`."""
    if isinstance(batch, MultiAgentBatch):
        return MultiAgentBatch(
            {pid: _transitions(b, extra_columns) for pid, b in batch.policy_batches.items()},
            batch.env_steps(),
        )
    return SampleBatch({k: batch[k] for k in (*REPLAY_COLUMNS, *extra_columns) if k in batch})


def bootstrap_discount(batch: dict[str, torch.Tensor], gamma: float) -> torch.Tensor | float:
    """gamma^k of each row's bootstrap term: k rewards were summed into its n-step
    return (the `n_step` column; absent when n_step = 1, then k = 1)."""
    k = batch.get(N_STEP)
    return gamma if k is None else torch.pow(gamma, k.float())


def polyak_update(source: torch.nn.Module, target: torch.nn.Module, tau: float) -> None:
    """theta' <- tau * theta + (1 - tau) * theta' for every parameter (Lillicrap et al.
    2015, arXiv:1509.02971, sec. 3); tau = 1 copies the weights."""
    targets, sources = list(target.parameters()), list(source.parameters())
    if len(targets) != len(sources):
        raise ValueError(
            f"polyak_update: the target has {len(targets)} parameters, the source {len(sources)}."
        )
    with torch.no_grad():
        # One multi-tensor kernel for all parameters instead of one lerp_ call per tensor.
        torch._foreach_lerp_(targets, sources, tau)


__all__ = [
    "OffPolicyTrainer",
    "PRIO_WEIGHTS",
    "bootstrap_discount",
    "make_replay_buffer",
    "polyak_update",
]


TARGET_PREFIX = "_target."


class TargetNetworkStateMixin:
    """Puts `self.target_model`'s weights into the policy state, prefixed with
    `TARGET_PREFIX`, so that a restored (or recreated) policy resumes with the
    same target network; a state without them re-syncs the target instead.

    Mix in before `TorchPolicy`; the policy defines `update_target()` and a
    `target_model` (or overrides `target_network()`).
    """

    def target_network(self) -> torch.nn.Module:
        return self.target_model  # type: ignore[attr-defined]

    def get_state(self) -> dict[str, Any]:
        state = super().get_state()  # type: ignore[misc]
        target = {
            TARGET_PREFIX + k: v.detach().cpu().numpy().copy()
            for k, v in self.target_network().state_dict().items()
        }
        state["weights"] = {**state["weights"], **target}
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        weights = state["weights"]
        n = len(TARGET_PREFIX)
        own = {k: v for k, v in weights.items() if not k.startswith(TARGET_PREFIX)}
        target = {
            k[n:]: torch.as_tensor(np.asarray(v))
            for k, v in weights.items()
            if k.startswith(TARGET_PREFIX)
        }
        super().set_state({**state, "weights": own})  # type: ignore[misc]
        if target:
            self.target_network().load_state_dict(target)
        else:
            self.update_target(1.0)  # type: ignore[attr-defined]
