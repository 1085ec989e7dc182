"""MARWIL (Wang et al. 2018) through the classic Trainer API: imitation weighted by advantage.

`DEFAULT_CONFIG` keeps RLlib 1.13's MARWIL keys and defaults. One training step: read one
batch per rollout worker from `input` (offline files, or the env with "sampler"), add it to
a replay buffer of `replay_buffer_size` steps, and once `learning_starts` steps were read,
take one gradient step on `train_batch_size` rows sampled uniformly from it. The loss is in
`marwil_torch_policy.py`; BC (`bc.py`) is MARWIL with `beta: 0`.
"""

from __future__ import annotations

from corral.agents.config import with_common_config
from corral.agents.marwil.marwil_torch_policy import MARWILTorchPolicy
from corral.agents.trainer import (
    NUM_AGENT_STEPS_SAMPLED,
    NUM_AGENT_STEPS_TRAINED,
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_TRAINED,
    Trainer,
)
from corral.execution import synchronous_parallel_sample
from corral.execution.learner_stream import LearnerStream
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch
from corral.utils.config_spec import Float, Int, Optional, Schedule
from corral.utils.replay_buffers import MultiAgentReplayBuffer

DEFAULT_CONFIG = with_common_config(
    {
        # === Input ===
        # Where the experiences come from: an offline dataset (a directory, glob or list
        # of JSON files, see COMMON_CONFIG's `input`). Each line must hold consecutive
        # steps, so that the discounted returns can be computed (several episodes per
        # line are fine).
        "input": "sampler",
        # Off-policy estimates of the policy's return from the input ("is", "wis",
        # "dm", "dr"; see corral.offline.estimators).
        "input_evaluation": ["is", "wis"],
        # MARWIL's postprocessing (the discounted returns) must run on the input.
        "postprocess_inputs": True,
        # === Training ===
        # Scale of the advantages in the exponential weights exp(beta A / c); 0.0 is
        # behaviour cloning (see bc.py).
        "beta": 1.0,
        # Weight of the value-function loss against the policy loss.
        "vf_coeff": 1.0,
        # Clip gradients to this global norm (None: no clipping).
        "grad_clip": None,
        # Adam's learning rate.
        "lr": 1e-4,
        # (corral) [[timestep, lr], ...] piecewise-linear learning-rate schedule over the
        # steps read (None: constant `lr`), as PG's, PPO's, A3C's ... (RLlib 1.13's
        # MARWIL has none).
        "lr_schedule": None,
        # Update rate of the moving average c^2 of the squared advantages (1e-8 in
        # the paper).
        "moving_average_sqd_adv_norm_update_rate": 1e-8,
        # Starting value of c^2.
        "moving_average_sqd_adv_norm_start": 100.0,
        # Rows per gradient step, sampled uniformly from the replay buffer.
        "train_batch_size": 2000,
        # Steps kept in the replay buffer the input is read into (the newest).
        "replay_buffer_size": 10000,
        # Steps read before the first gradient step.
        "learning_starts": 0,
        # Weight of a bonus on the mean log std of a Gaussian policy (keeps it from
        # collapsing onto the data; 0: none).
        "bc_logstd_coeff": 0.0,
        # === Parallelism ===
        # Rollout workers reading the input (0: the driver reads).
        "num_workers": 0,
    }
)

# Type and range of MARWIL's own keys (COMMON_CONFIG's are in COMMON_CONFIG_SPECS).
CONFIG_SPECS = {
    "beta": Float(0),
    "vf_coeff": Float(0),
    "grad_clip": Optional(Float(0, lo_open=True)),
    "moving_average_sqd_adv_norm_update_rate": Float(0, 1),
    "moving_average_sqd_adv_norm_start": Float(0, lo_open=True),
    "replay_buffer_size": Int(1, integral_float_ok=True),
    "learning_starts": Int(0, integral_float_ok=True),
    "bc_logstd_coeff": Float(0),
    "lr_schedule": Schedule(Float(0)),
}

# The columns MARWIL's loss reads (the rest of an input batch is not kept).
_BUFFER_COLUMNS = (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.ADVANTAGES)


class MARWILTrainer(Trainer):
    """Monotonic advantage re-weighted imitation learning (Wang et al. 2018)."""

    _name = "MARWIL"
    _default_config = DEFAULT_CONFIG
    _config_specs = CONFIG_SPECS
    _policy_class = MARWILTorchPolicy
    # `stream_to_learners`: the loss's columns (kept, and required).
    _stream_columns = (_BUFFER_COLUMNS, _BUFFER_COLUMNS)

    def setup(self, config: dict) -> None:
        super().setup(config)
        self.local_replay_buffer = MultiAgentReplayBuffer(
            int(self.config["replay_buffer_size"]), seed=self.config.get("seed")
        )
        self._stream = LearnerStream.of(self)

    def validate_config(self, config: dict) -> None:
        super().validate_config(config)
        if config["train_batch_size"] < 1:
            raise ValueError(f"`train_batch_size` must be >= 1, got {config['train_batch_size']}")

    def training_step(self) -> dict:
        if self._stream is not None:
            return self._stream.training_step(self)
        batch = synchronous_parallel_sample(self.workers).as_multi_agent()
        counters = self._counters
        counters[NUM_ENV_STEPS_SAMPLED] += batch.env_steps()
        counters[NUM_AGENT_STEPS_SAMPLED] += batch.agent_steps()
        self.local_replay_buffer.add(_loss_columns(batch))
        if len(self.local_replay_buffer) < max(1, self.config["learning_starts"]):
            return {}
        train_batch = self.local_replay_buffer.sample(self.config["train_batch_size"])
        results = self.learner_group.update(
            batch=train_batch,
            num_epochs=1,
            minibatch_size=None,
            timesteps={"num_env_steps_sampled_lifetime": counters[NUM_ENV_STEPS_SAMPLED]},
        )
        counters[NUM_ENV_STEPS_TRAINED] += train_batch.env_steps()
        counters[NUM_AGENT_STEPS_TRAINED] += train_batch.agent_steps()
        self.workers.sync_weights(global_vars={"timestep": counters[NUM_ENV_STEPS_SAMPLED]})
        return self.learner_info_from(results)


def _loss_columns(batch: MultiAgentBatch) -> MultiAgentBatch:
    """Only the columns the loss reads, so that batches of differing columns mix."""
    missing = {
        pid: sorted(set(_BUFFER_COLUMNS) - set(b))
        for pid, b in batch.policy_batches.items()
        if set(_BUFFER_COLUMNS) - set(b)
    }
    if missing:
        raise ValueError(
            f"MARWIL's input lacks columns {missing}: the discounted returns (`advantages`) "
            "come from the policy's postprocessing; keep `postprocess_inputs: True`."
        )
    return MultiAgentBatch(
        {
            pid: SampleBatch({k: b[k] for k in _BUFFER_COLUMNS})
            for pid, b in batch.policy_batches.items()
        },
        batch.env_steps(),
    )
