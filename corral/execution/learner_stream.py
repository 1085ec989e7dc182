"""`stream_to_learners`: an offline trainer's Ray Data input streamed to its learners.

The offline algorithms (BC, MARWIL, CQL, CQL_DQN) read their `input` in their rollout workers
by default, into a replay buffer that their train batches are sampled from. With
``"stream_to_learners": True`` and a Ray Data `input` (a `ray.data.Dataset`, or
``"dataset"`` with ``input_config``), a `LearnerStream` hands the dataset to the learners
instead, through the Learner API's `data_iterators`: one part of
``dataset.streaming_split(num_learners, equal=True)`` per learner (the dataset's own iterator
with one learner or none). Every `LearnerStream.update` is one gradient step on the next
`train_batch_size` rows of the stream, in the dataset's order; whoever reads a batch
prepares it as a rollout worker's reader would (`prepare_streamed_rows`: decoding, action
clipping / normalising, ``postprocess_inputs`` with the policy it trains).

Restrictions (checked by `check_stream_config` when the trainer is built): the input must be
a Ray Data dataset of one policy's rows and `num_workers` 0 (no worker reads it);
off-policy estimates (`input_evaluation`) are not computed. The stream's position is not
checkpointed: a restored trainer starts a new pass.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from corral.core.learner.learner import ALL_MODULES, NUM_ENV_STEPS_SAMPLED_LIFETIME
from corral.core.learner.training_data import end_streams
from corral.execution.common import count_sampled, count_trained
from corral.offline.dataset_reader import (
    STREAM_CONFIG_KEYS,
    check_stream_input,
    prepare_streamed_rows,
    row_shapes,
    stream_dataset,
)
from corral.policy.sample_batch import DEFAULT_POLICY_ID
from corral.utils.metrics import NUM_ENV_STEPS_SAMPLED, NUM_ENV_STEPS_TRAINED, stats_to_values

logger = logging.getLogger(__name__)


def check_stream_config(config: Mapping[str, Any], trainer: Any = None) -> None:
    """Raises for a config that cannot stream its input to the learners (see the module
    docstring), or whose trainer cannot (it names no `_stream_columns`); warns that
    `input_evaluation` is not computed when it is set."""
    if trainer is not None and getattr(trainer, "_stream_columns", None) is None:
        raise ValueError(
            f"{getattr(trainer, '_name', type(trainer).__name__)} does not stream its input "
            "to the learners: stream_to_learners is for the offline algorithms (BC, "
            "MARWIL, CQL, CQL_DQN)."
        )
    check_stream_input(config)
    if config.get("num_workers"):
        raise ValueError(
            "stream_to_learners reads the dataset on the learners: `num_workers` must be 0 "
            f"(rollout workers would not read it), got {config['num_workers']}."
        )
    policies = (config.get("multiagent") or {}).get("policies") or {}
    if set(policies) - {DEFAULT_POLICY_ID}:
        raise ValueError(
            "stream_to_learners streams the rows of one (the default) policy; multi-agent "
            "datasets are read by the rollout workers (leave it False)."
        )
    if config.get("input_evaluation"):
        logger.warning(
            "stream_to_learners: no rollout worker reads the dataset, so the off-policy "
            "estimates of input_evaluation=%r are not computed (set input_evaluation: [] "
            "to silence this).",
            config["input_evaluation"],
        )


class _Rows(NamedTuple):
    """Single-agent rows read from the stream, as the step counters count a batch."""

    count: int

    def env_steps(self) -> int:
        return self.count

    def agent_steps(self) -> int:
        return self.count


class LearnerStream:
    """A trainer's Ray Data input, streamed to its learners (made on first use).

    A trainer that can stream names the columns of its loss as `_stream_columns`
    (`(keep, require)`), builds its stream with `LearnerStream.of(self)` in `setup` and
    starts its `training_step` with `if self._stream: return self._stream.training_step(self)`.

    Args:
        config: the trainer's config (its `input`, `num_learners` and the keys of
            `STREAM_CONFIG_KEYS`).
        keep: the columns the loss may read (those present are kept).
        require: the columns every prepared batch must hold.
    """

    def __init__(
        self, config: Mapping[str, Any], keep: Sequence[str], require: Sequence[str]
    ) -> None:
        self.config = config
        self.keep, self.require = tuple(keep), tuple(require)
        self._iterators: list[Any] | None = None
        self._prepare: Any = None

    @classmethod
    def of(cls, trainer: Any) -> LearnerStream | None:
        """The trainer's stream with ``stream_to_learners``, else None."""
        if not trainer.config.get("stream_to_learners"):
            return None
        keep, require = trainer._stream_columns
        return cls(trainer.config, keep, require)

    def _start(self) -> None:
        dataset = stream_dataset(self.config)
        n = max(1, int(self.config.get("num_learners") or 0))
        self._iterators = (
            list(dataset.streaming_split(n, equal=True)) if n > 1 else [dataset.iterator()]
        )
        self._prepare = functools.partial(
            prepare_streamed_rows,
            config={k: self.config.get(k) for k in STREAM_CONFIG_KEYS},
            shapes=row_shapes(dataset),
            keep=self.keep,
            require=self.require,
        )

    def update(self, trainer: Any) -> dict | None:
        """One gradient step of `trainer`'s learners on the next `train_batch_size` rows,
        counted as sampled and trained; returns the learner results (`Stats` leaves)."""
        if self._iterators is None:
            self._start()
        counters = trainer._counters
        results = trainer.learner_group.update(
            data_iterators=self._iterators,
            num_iters=1,
            minibatch_size=self.config["train_batch_size"],
            num_epochs=1,
            prepare_rows=self._prepare,
            timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: counters[NUM_ENV_STEPS_SAMPLED]},
        )
        # Rows trained, summed over the learners (what a cut to equal shards kept): read
        # from the stream, so counted as sampled too.
        trained = stats_to_values(results or {}).get(ALL_MODULES, {})
        rows = _Rows(int(trained.get(NUM_ENV_STEPS_TRAINED, self.config["train_batch_size"])))
        count_sampled(counters, rows)
        count_trained(counters, rows)
        return results

    def stop(self) -> None:
        """Ends the passes this process holds open (`end_streams`); the learners' own
        iterators end with the learners."""
        if self._iterators is not None:
            end_streams(self._iterators)
            self._iterators = None

    def training_step(self, trainer: Any, after_update: Callable[[], None] | None = None) -> dict:
        """A streamed training step: `update`, then `after_update` (e.g. target network
        updates), the weights synced to the workers; returns the learner info."""
        results = self.update(trainer)
        if after_update is not None:
            after_update()
        timestep = trainer._counters[NUM_ENV_STEPS_SAMPLED]
        trainer.workers.sync_weights(global_vars={"timestep": timestep})
        return trainer.learner_info_from(results)
