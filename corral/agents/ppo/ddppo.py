"""DD-PPO, decentralized distributed PPO (Wijmans et al. 2020, arXiv:1911.00357), through the
classic Trainer API (RLlib 1.13's `DDPPOTrainer`).

There is no central learner. Every remote rollout worker samples its own batch
(`rollout_fragment_length * num_envs_per_worker` env steps), standardises its
advantages and runs PPO's `num_sgd_iter` epochs of `sgd_minibatch_size` minibatches on
it, with its own `Learner`, in place on the policies it samples with. The workers form
one torch.distributed group (`torch_distributed_backend`, gloo by default) and average
every gradient across it (`corral.core.learner.distributed`), so all of them take the
same steps and hold the same weights. The effective minibatch is
`sgd_minibatch_size * num_workers` rows.

The driver only counts steps, gathers the workers' learner stats and episode metrics,
and (`keep_local_weights_in_sync`) copies worker 1's weights into its local worker,
whose policies `get_policy()`, `compute_single_action()` and evaluation use.
Checkpoints take the weights from the workers and the optimiser state from worker 1's
learner; a restore gives both to every worker.

Like RLlib's, DD-PPO has no adaptive KL penalty (it would need a central view of the
KL), and straggler mitigation is not implemented.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from typing import Any

from corral.agents.ppo.ppo import DEFAULT_CONFIG as PPO_DEFAULT_CONFIG
from corral.agents.ppo.ppo import PPOTrainer, standardize
from corral.core.learner import LearnerGroup
from corral.evaluation.backend import WorkerCrashedError, WorkerFailure, wait_all_fail_fast
from corral.evaluation.rollout_worker import RolloutWorker
from corral.evaluation.worker_handle import WorkerFuture
from corral.execution.common import (
    NUM_AGENT_STEPS_SAMPLED,
    NUM_AGENT_STEPS_TRAINED,
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    NUM_ENV_STEPS_TRAINED,
)
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch
from corral.utils.config_spec import AnyOf, Bool, Int, OneOf

DEFAULT_CONFIG = PPOTrainer.merge_trainer_configs(
    PPO_DEFAULT_CONFIG,
    {
        # Steps per fragment per env. Each rollout worker samples and trains on
        # `rollout_fragment_length * num_envs_per_worker` env steps per round.
        "rollout_fragment_length": 100,
        # Envs per rollout worker (vectorised).
        "num_envs_per_worker": 5,
        # Rows of each minibatch on each worker; the effective minibatch is
        # `sgd_minibatch_size * num_workers` rows. At most a worker's batch.
        "sgd_minibatch_size": 50,
        # Epochs of SGD over each worker's batch per round.
        "num_sgd_iter": 10,
        # After each round, copy worker 1's weights into the driver's local worker (which
        # `get_policy()`, `compute_single_action()` and evaluation use); a little
        # overhead. Checkpoints take the weights from the workers either way.
        "keep_local_weights_in_sync": True,
        # The torch.distributed backend of the workers' group: "gloo" (CPU tensors, and
        # GPU ones), "nccl" (one GPU per worker) or "mpi" (a torch built with MPI).
        "torch_distributed_backend": "gloo",
        # Learning happens on the rollout workers: the driver gets no GPU (must be 0).
        "num_gpus": 0,
        # GPUs of each rollout worker, which samples and trains on them. RLlib 1.13's
        # default is 1; corral's is 0, so that DD-PPO runs where there is no GPU.
        "num_gpus_per_worker": 0,
        # Set by DD-PPO itself to each worker's batch size, `rollout_fragment_length *
        # num_envs_per_worker`: leave it at -1 and set `rollout_fragment_length`.
        "train_batch_size": -1,
        # No KL penalty: adapting it would need a central learner (both must be 0).
        "kl_coeff": 0.0,
        "kl_target": 0.0,
        # Fragments of exactly `rollout_fragment_length` steps per env, so that all
        # workers train on equally large batches (must be "truncate_episodes").
        "batch_mode": "truncate_episodes",
    },
    _allow_unknown_configs=True,
)

# Type and range of DD-PPO's own keys (PPO's are in `corral.agents.ppo.ppo.CONFIG_SPECS`),
# checked when the trainer is built.
CONFIG_SPECS = {
    "keep_local_weights_in_sync": Bool(),
    "torch_distributed_backend": OneOf("gloo", "nccl", "mpi"),
    "train_batch_size": AnyOf(OneOf(-1), Int(1)),
}


class DDPPOTrainer(PPOTrainer):
    """Decentralized distributed PPO: the rollout workers are the learners (see the
    module docstring)."""

    min_num_workers = 1
    _name = "DDPPO"
    _default_config = DEFAULT_CONFIG
    _config_specs = CONFIG_SPECS

    def validate_config(self, config: dict) -> None:
        """RLlib 1.13's checks; also fills in `train_batch_size` (each worker's batch)."""
        per_worker = config["rollout_fragment_length"] * config["num_envs_per_worker"]
        if config["train_batch_size"] not in (-1, per_worker):
            raise ValueError(
                f"`train_batch_size` must be -1 for DD-PPO, got {config['train_batch_size']}: "
                "each rollout worker trains on its own `rollout_fragment_length * "
                f"num_envs_per_worker` = {per_worker} env steps. Set rollout_fragment_length "
                "instead of train_batch_size for DDPPO."
            )
        config["train_batch_size"] = per_worker
        if config["sgd_minibatch_size"] > per_worker:
            raise ValueError(
                f"`sgd_minibatch_size` ({config['sgd_minibatch_size']}) must be <= each "
                f"rollout worker's batch, `rollout_fragment_length * num_envs_per_worker` "
                f"= {per_worker}."
            )
        super().validate_config(config)
        if config["num_workers"] < 1:
            raise ValueError(
                f"`num_workers` must be >= 1, got {config['num_workers']}: due to its "
                "distributed, decentralized nature, DD-PPO requires `num_workers` to be "
                ">= 1 (the remote rollout workers are its learners)."
            )
        if config["framework"] != "torch":
            raise ValueError(
                f"`framework` must be 'torch', got {config['framework']!r}: distributed "
                "data parallel is only supported for PyTorch."
            )
        if config["num_gpus"]:
            raise ValueError(
                f"`num_gpus` must be 0 for DD-PPO, got {config['num_gpus']}: all "
                "optimization is happening on the workers. Give them GPUs with "
                "`num_gpus_per_worker` instead."
            )
        if config.get("num_learners"):
            raise ValueError(
                f"`num_learners` must be 0 for DD-PPO, got {config['num_learners']}: its "
                "learners are its rollout workers (`num_workers`)."
            )
        if config["batch_mode"] != "truncate_episodes":
            raise ValueError(
                f"`batch_mode` must be 'truncate_episodes' for DD-PPO, got "
                f"{config['batch_mode']!r}: distributed data parallel requires "
                "truncate_episodes batch mode (equally large batches on every worker)."
            )
        if config["kl_coeff"] != 0.0 or config["kl_target"] != 0.0:
            raise ValueError(
                f"`kl_coeff` and `kl_target` must be 0 for DD-PPO, got kl_coeff="
                f"{config['kl_coeff']}, kl_target={config['kl_target']}: DDPPO doesn't "
                "support KL penalties like PPO-1 (tune `entropy_coeff` instead)."
            )
        model = config["model"]
        if model.get("use_lstm") or model.get("use_attention"):
            raise NotImplementedError(
                "DD-PPO with a recurrent model (model.use_lstm / model.use_attention) is "
                "not built: the workers' batches hold different numbers of sequences, so "
                "their minibatches (each a collective gradient average) would not line up."
            )
        _check_distributed_backend(config)

    def setup(self, config: dict) -> None:
        super().setup(config)
        try:
            local = self.workers.local_worker()
            trained = [pid for pid in local.policy_map if local.is_policy_to_train(pid)]
            recurrent = [pid for pid in trained if local.policy_map[pid].is_recurrent()]
            if recurrent:
                raise NotImplementedError(
                    f"DD-PPO with recurrent policies ({recurrent}) is not built: the "
                    "workers' batches hold different numbers of sequences, so their "
                    "minibatches (each a collective gradient average) would not line up."
                )
            # Every worker built its policies with its own seed: start all from the
            # driver's weights, then join them into one group.
            self.workers.sync_weights()
            self._learner_group = LearnerGroup(
                self.config,
                local.policy_map,
                self.callbacks,
                policy_ids=trained,
                rollout_workers=self.workers.remote_workers(),
            )
        except BaseException:
            self.cleanup()
            raise

    def training_step(self) -> dict:
        """One round: every remote worker samples its batch and trains on it (gradients
        averaged across the workers); the driver counts the steps, merges the workers'
        learner stats and, with `keep_local_weights_in_sync`, takes worker 1's weights.

        The counters go up by each worker's env and agent steps (`timesteps_total` then
        follows `count_steps_by`, as in every trainer). The schedules' `timestep` is the
        agent steps sampled so far, whatever `count_steps_by` says: RLlib 1.13's DD-PPO
        sends the workers `num_agent_steps_sampled` (the same as env steps with one
        agent, more with several acting at once)."""
        group = self.learner_group
        global_vars = {"timestep": self._counters[NUM_AGENT_STEPS_SAMPLED]}
        options = {
            **self.sgd_settings(),
            # The learner's schedules read this key: the agent steps, as above.
            "timesteps": {NUM_ENV_STEPS_SAMPLED_LIFETIME: global_vars["timestep"]},
        }
        futures = [
            w.apply(sample_and_learn, global_vars, options) for w in self.workers.remote_workers()
        ]
        try:
            results = wait_all_fail_fast(futures)
        except WorkerFailure as failure:
            raise _first_cause(futures, failure) from None
        for result in results:
            self._counters[NUM_ENV_STEPS_SAMPLED] += result["env_steps"]
            self._counters[NUM_AGENT_STEPS_SAMPLED] += result["agent_steps"]
            self._counters[NUM_ENV_STEPS_TRAINED] += result["env_steps"]
            self._counters[NUM_AGENT_STEPS_TRAINED] += result["agent_steps"]
        info = self.learner_info_from(group.merge_metrics(r["learner"] for r in results))
        self.workers.local_worker().set_global_vars(
            {"timestep": self._counters[NUM_AGENT_STEPS_SAMPLED]}
        )
        if self.config["keep_local_weights_in_sync"]:
            self._pull_weights()
        return info

    def _pull_weights(self) -> None:
        """The driver's local worker takes worker 1's policy states (weights and the
        rest of each policy's state; the filters stay the driver's merged ones). The
        remote workers hold them already: nothing is marked to be sent back."""
        remote = self.workers.remote_workers()
        if not remote:
            return
        state = remote[0].call("get_state").result()
        self.workers.local_worker().set_state({"policy_states": state["policy_states"]})

    def _before_evaluate(self) -> None:
        if not self.config["keep_local_weights_in_sync"]:
            self._pull_weights()

    def save_checkpoint(self, checkpoint_dir: str) -> str:
        """Checkpoints with the workers' current weights (see `Trainer.save_checkpoint`)."""
        self._pull_weights()
        return super().save_checkpoint(checkpoint_dir)

    def __getstate__(self) -> dict:
        self._pull_weights()
        return super().__getstate__()

    def try_recover_from_step_attempt(self, error: BaseException | None = None) -> None:
        """Drops or recreates the failed rollout workers (`Trainer`'s recovery), then
        forms the workers' group anew: a recreated worker gets a surviving one's
        weights and optimiser state, so all of them step alike again."""
        super().try_recover_from_step_attempt(error)
        self.learner_group.attach(self.workers.remote_workers())


def sample_and_learn(worker: RolloutWorker, global_vars: dict, options: dict[str, Any]) -> dict:
    """(Runs in each remote rollout worker.) One DD-PPO round of this worker: sample a
    batch, standardise its advantages, train on it with the worker's data-parallel
    learner (`LearnerWorker.update_own_batch`, with `options` as `Learner.update`'s
    keyword arguments).

    Returns:
        {"learner": the learner's metrics, "env_steps": ..., "agent_steps": ...}
        (the metrics are None when another worker failed to sample and the group
        skipped the round; that worker raises its error).
    """
    from corral.core.learner.distributed import attached_learner

    learner = attached_learner(worker)
    worker.set_global_vars(global_vars)
    try:
        batch = worker.sample().as_multi_agent()
    except Exception:
        # The others learn of it in their first collective and skip the round,
        # instead of waiting for this worker until the group's timeout.
        with contextlib.suppress(Exception):
            learner.update_own_batch(None)
        raise
    trained = {
        pid: policy_batch
        for pid, policy_batch in batch.policy_batches.items()
        if worker.is_policy_to_train(pid, batch)
    }
    for policy_batch in trained.values():
        standardize(policy_batch, SampleBatch.ADVANTAGES)
    metrics = learner.update_own_batch(MultiAgentBatch(trained, batch.env_steps()), **options)
    if metrics is None:
        # Another worker failed to sample: nothing was trained on these episodes.
        worker.discard_metrics_of_last_samples(1)
    return {
        "learner": metrics,
        "env_steps": batch.env_steps(),
        "agent_steps": batch.agent_steps(),
    }


# How long a failed round waits for the other workers' calls to end, to tell which worker
# failed first: when one dies, the others' collectives fail within milliseconds.
_SETTLE_S = 5.0


def _first_cause(futures: Sequence[WorkerFuture], failure: WorkerFailure) -> WorkerFailure:
    """The failure to recover from, of a round whose `failure` came first.

    A worker that dies breaks its peers' collectives too: their calls fail with a
    torch.distributed error, which must not get them dropped (or recreated) as the
    culprit. So the others' calls get a moment to end, and a crashed worker's failure,
    if any, is the one returned.
    """
    deadline = time.monotonic() + _SETTLE_S
    while not all(f.done() for f in futures) and time.monotonic() < deadline:
        time.sleep(0.01)
    for f in futures:
        if f.done():
            try:
                f.result(0)
            except WorkerCrashedError as crashed:
                return crashed
            except WorkerFailure:
                pass
    return failure


def _check_distributed_backend(config: dict) -> None:
    """`torch_distributed_backend` must be usable with the config's devices."""
    backend = config["torch_distributed_backend"]
    on_gpus = (config["num_gpus_per_worker"] or 0) > 0 and not config.get("_fake_gpus")
    if backend == "nccl" and not on_gpus:
        raise ValueError(
            "torch_distributed_backend='nccl' needs a GPU on every rollout worker "
            f"(num_gpus_per_worker > 0 without _fake_gpus; got num_gpus_per_worker="
            f"{config['num_gpus_per_worker']}, _fake_gpus={config.get('_fake_gpus')}): "
            "use 'gloo' on CPUs."
        )
    if (
        backend == "nccl"
        and config.get("backend", "local") == "local"
        and config["num_workers"] > 1
    ):
        raise ValueError(
            "torch_distributed_backend='nccl' needs one GPU per rollout worker, but with "
            "backend='local' all rollout workers use the current CUDA device: use 'gloo' "
            "(it averages GPU tensors too), or backend='ray' (one GPU per worker actor)."
        )
    if backend == "mpi":
        import torch.distributed as dist

        if not dist.is_mpi_available():
            raise ValueError(
                "torch_distributed_backend='mpi' needs a torch built with MPI (this one "
                "is not: torch.distributed.is_mpi_available() is False); use 'gloo'."
            )


__all__ = ["DEFAULT_CONFIG", "DDPPOTrainer"]
