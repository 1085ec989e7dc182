"""MARWIL (Wang et al. 2018) through the classic Trainer API: imitation weighted by advantage.

`DEFAULT_CONFIG` keeps RLlib 1.13's MARWIL keys and defaults. One training step: read one
batch per rollout worker from `input` (offline files, or the env with "sampler"), add it to
a replay buffer of `replay_buffer_size` steps, and once `learning_starts` steps were read,
take one gradient step on `train_batch_size` rows sampled uniformly from it. The loss is in
`marwil_torch_policy.py`; BC (`bc.py`) is MARWIL with `beta: 0`.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from corral.agents.config import with_common_config
from corral.agents.marwil.marwil_torch_policy import MARWILTorchPolicy
from corral.agents.trainer import (
    NUM_AGENT_STEPS_SAMPLED,
    NUM_AGENT_STEPS_TRAINED,
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_TRAINED,
    Trainer,
)
from corral.core.learner.learner import ALL_MODULES
from corral.execution import synchronous_parallel_sample
from corral.offline.dataset_reader import (
    STREAM_CONFIG_KEYS,
    check_stream_input,
    prepare_streamed_rows,
    row_shapes,
    stream_dataset,
)
from corral.policy.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch
from corral.utils.config_spec import Bool, Float, Int, Optional
from corral.utils.metrics import stats_to_values
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
        # With a Ray Data dataset as `input` (a ray.data.Dataset, or "dataset" with
        # `input_config`): stream its rows to the learners through the Learner API's
        # `data_iterators` (one `streaming_split` part per learner with `num_learners`
        # > 1) instead of reading them in the rollout workers into the replay buffer.
        # Each learner prepares the rows it reads (actions clipped / normalised,
        # `postprocess_inputs` with the weights it trains) and every training step is
        # one gradient step on the next `train_batch_size` rows, in the dataset's order
        # (shuffle the dataset itself to mix it, e.g. `ds.random_shuffle()`);
        # `replay_buffer_size` and `learning_starts` do not apply, and `num_workers`
        # must be 0. A restored trainer starts a new pass over the dataset.
        "stream_to_learners": False,
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
    "stream_to_learners": Bool(),
}

logger = logging.getLogger(__name__)

# The columns MARWIL's loss reads (the rest of an input batch is not kept).
_BUFFER_COLUMNS = (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.ADVANTAGES)


class MARWILTrainer(Trainer):
    """Monotonic advantage re-weighted imitation learning (Wang et al. 2018)."""

    _name = "MARWIL"
    _default_config = DEFAULT_CONFIG
    _config_specs = CONFIG_SPECS
    _policy_class = MARWILTorchPolicy

    def setup(self, config: dict) -> None:
        super().setup(config)
        self.local_replay_buffer = MultiAgentReplayBuffer(
            int(self.config["replay_buffer_size"]), seed=self.config.get("seed")
        )
        self._streams: list[Any] | None = None  # `stream_to_learners`: made on first use

    def validate_config(self, config: dict) -> None:
        super().validate_config(config)
        if config["train_batch_size"] < 1:
            raise ValueError(f"`train_batch_size` must be >= 1, got {config['train_batch_size']}")
        if config.get("stream_to_learners"):
            check_stream_input(config)
            if config["num_workers"]:
                raise ValueError(
                    "stream_to_learners reads the dataset on the learners: `num_workers` "
                    f"must be 0 (rollout workers would not read it), got "
                    f"{config['num_workers']}."
                )
            if config.get("input_evaluation"):
                logger.warning(
                    "stream_to_learners: no rollout worker reads the dataset, so the "
                    "off-policy estimates of input_evaluation=%r are not computed (set "
                    "input_evaluation: [] to silence this).",
                    config["input_evaluation"],
                )
            policies = config.get("multiagent", {}).get("policies") or {}
            if set(policies) - {DEFAULT_POLICY_ID}:
                raise ValueError(
                    "stream_to_learners streams the rows of one (the default) policy; "
                    "multi-agent datasets are read by the rollout workers (leave it False)."
                )

    def training_step(self) -> dict:
        if self.config.get("stream_to_learners"):
            return self._training_step_streamed()
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

    def _training_step_streamed(self) -> dict:
        """One gradient step on the next `train_batch_size` rows of the dataset, read
        and prepared by the learners (`stream_to_learners`)."""
        cfg = self.config
        group = self.learner_group
        if self._streams is None:
            dataset = stream_dataset(cfg)
            n = max(1, int(cfg.get("num_learners") or 0))
            self._streams = (
                list(dataset.streaming_split(n, equal=True)) if n > 1 else [dataset.iterator()]
            )
            self._prepare = functools.partial(
                prepare_streamed_rows,
                config={k: cfg.get(k) for k in STREAM_CONFIG_KEYS},
                shapes=row_shapes(dataset),
                keep=_BUFFER_COLUMNS,
            )
        counters = self._counters
        results = group.update(
            data_iterators=self._streams,
            num_iters=1,
            minibatch_size=cfg["train_batch_size"],
            num_epochs=1,
            prepare_rows=self._prepare,
            timesteps={"num_env_steps_sampled_lifetime": counters[NUM_ENV_STEPS_SAMPLED]},
        )
        rows = _rows_trained(results, cfg["train_batch_size"])
        for key in (NUM_ENV_STEPS_SAMPLED, NUM_AGENT_STEPS_SAMPLED):
            counters[key] += rows
        for key in (NUM_ENV_STEPS_TRAINED, NUM_AGENT_STEPS_TRAINED):
            counters[key] += rows
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


def _rows_trained(results: dict | None, default: int) -> int:
    """Rows the learners trained on in one update (summed over learners)."""
    values = stats_to_values(results or {}).get(ALL_MODULES, {})
    return int(values.get("num_env_steps_trained", default))
