"""QMIX: monotonic value function factorisation for groups of cooperating agents.

Rashid et al. 2018, "QMIX: Monotonic Value Function Factorisation for Deep Multi-Agent
Reinforcement Learning" (ICML, arXiv:1803.11485), as RLlib 1.13's `QMixTrainer`; with
`mixer: "vdn"` it is VDN (Sunehag et al. 2018), with `mixer: None` independent
Q-learners. The agents of a group (`MultiAgentEnv.with_agent_groups`) share one recurrent
Q-network; the loss is in `qmix_policy.py`.

One training step (RLlib 1.13's `training_iteration`): sample complete episodes (at least
`rollout_fragment_length` env steps per worker) and add them, as one batch, to a
`SimpleReplayBuffer` of `replay_buffer_config.capacity` such batches; once
`replay_buffer_config.learning_starts` env steps were sampled, draw stored batches
uniformly until they hold `train_batch_size` steps and take one gradient step (RMSprop)
on those whole episodes; copy the online networks (agent network and mixer) into the
targets every `target_network_update_freq` sampled env steps; push the weights to the
workers.
"""

from __future__ import annotations

from corral.agents.off_policy import OffPolicyTrainer, with_off_policy_config
from corral.agents.qmix.qmix_policy import QMixTorchPolicy
from corral.agents.trainer import Trainer
from corral.execution.common import count_sampled
from corral.execution.rollout_ops import synchronous_parallel_sample
from corral.execution.train_ops import learner_results_per_iteration, update_learners
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch, concat_samples
from corral.utils import config_spec as cs
from corral.utils.deprecation import DEPRECATED_VALUE
from corral.utils.replay_buffers import SimpleReplayBuffer

DEFAULT_CONFIG = with_off_policy_config(
    {
        # === QMix ===
        # Mixing network: "qmix" (monotonic, hypernetworks on the global state), "vdn"
        # (the sum of the agents' Q-values) or None (independent Q-learners).
        "mixer": "qmix",
        # Units of the mixing network's hidden layer (its embedding).
        "mixing_embed_dim": 32,
        # Double Q-learning: the next actions from the online network, valued by the
        # target network.
        "double_q": True,
        # Optimise over complete episodes.
        "batch_mode": "complete_episodes",
        # === Exploration ===
        # Each agent acts epsilon-greedily among its allowed actions; epsilon falls
        # linearly from 1.0 to 0.01 over 40k env steps.
        "exploration_config": {
            "type": "EpsilonGreedy",
            "initial_epsilon": 1.0,
            "final_epsilon": 0.01,
            "epsilon_timesteps": 40000,
        },
        # === Evaluation ===
        # Evaluate greedily (epsilon 0).
        "evaluation_config": {"explore": False},
        # Minimum env steps per `train()` call.
        "timesteps_per_iteration": 1000,
        # Copy the online networks into the targets every this many sampled env steps.
        "target_network_update_freq": 500,
        # === Replay buffer ===
        # Deprecated: use `replay_buffer_config: {capacity: ...}`.
        "buffer_size": DEPRECATED_VALUE,
        # A `SimpleReplayBuffer` of `capacity` sampled batches (not timesteps), each
        # holding complete episodes; learning starts once `learning_starts` env steps
        # were sampled.
        "replay_buffer_config": {
            "type": "SimpleReplayBuffer",
            "capacity": 1000,
            "learning_starts": 1000,
        },
        # === Optimization ===
        # Learning rate of the RMSprop optimiser.
        "lr": 0.0005,
        # RMSprop's smoothing constant alpha.
        "optim_alpha": 0.99,
        # RMSprop's epsilon.
        "optim_eps": 0.00001,
        # Clip gradients to this global norm (None: no clipping).
        "grad_norm_clipping": 10,
        # Env steps per worker per sampling round (complete episodes: at least this many).
        "rollout_fragment_length": 4,
        # Env steps (of whole episodes) per gradient step: stored batches are drawn until
        # they hold at least this many.
        "train_batch_size": 32,
        # === Parallelism ===
        "num_workers": 0,
        # Compute priorities in the workers (not used: QMIX replays uniformly).
        "worker_side_prioritization": False,
        # Minimum seconds per `train()` call.
        "min_time_s_per_reporting": 1,
        # === Model ===
        # The agents' GRU has `lstm_cell_size` units; episodes are cut into sequences of
        # at most `max_seq_len` steps (RLlib's default: never cut).
        "model": {
            "lstm_cell_size": 64,
            "max_seq_len": 999999,
        },
        "framework": "torch",
    }
)

# Type and range of QMIX's own keys (the replay keys are in `REPLAY_CONFIG_SPECS`).
QMIX_CONFIG_SPECS = {
    "mixer": cs.OneOf("qmix", "vdn", None),
    "mixing_embed_dim": cs.Int(1),
    "double_q": cs.Bool(),
    "optim_alpha": cs.Float(0, 1),
    "optim_eps": cs.Float(0, lo_open=True),
    "grad_norm_clipping": cs.Optional(cs.Float(0, lo_open=True)),
    "replay_buffer_config": cs.Dict(
        {
            "type": cs.AnyOf(cs.Str(), cs.CallableSpec("a replay buffer class")),
            "capacity": cs.Int(1, integral_float_ok=True),
            "learning_starts": cs.Int(0, integral_float_ok=True),
        },
        what='a dict {"type": ..., "capacity": ..., "learning_starts": ...}',
    ),
}

# The columns a stored batch keeps: what the loss reads.
EPISODE_COLUMNS = QMixTorchPolicy.train_columns


class QMixTrainer(OffPolicyTrainer):
    """QMIX (Rashid et al. 2018), VDN or independent Q-learning for grouped agents."""

    _name = "QMIX"
    _default_config = DEFAULT_CONFIG
    _config_specs = QMIX_CONFIG_SPECS
    _policy_class = QMixTorchPolicy
    _config_rules: tuple[cs.Rule, ...] = (
        cs.Rule(
            lambda c: not c.get("store_buffer_in_checkpoints"),
            "QMIX's replay buffer (a SimpleReplayBuffer of multi-agent batches) is not "
            "written into checkpoints: set store_buffer_in_checkpoints=False.",
        ),
        cs.Rule(
            lambda c: c["replay_buffer_config"].get("type") == "SimpleReplayBuffer",
            "QMIX replays whole sampled batches: replay_buffer_config.type must be "
            "'SimpleReplayBuffer', got {replay_buffer_config[type]!r}.",
        ),
        cs.Rule(
            lambda c: not c.get("prioritized_replay"),
            "QMIX replays uniformly (as RLlib 1.13's): set prioritized_replay=False.",
        ),
    )

    def setup(self, config: dict) -> None:
        Trainer.setup(self, config)
        self.local_replay_buffer = SimpleReplayBuffer(
            int(self.config["replay_buffer_config"]["capacity"]), seed=self.config.get("seed")
        )
        self._train_credit = 0.0
        self._last_learner_info: dict = {}

    @learner_results_per_iteration
    def training_step(self) -> dict:
        cfg = self.config
        batch = synchronous_parallel_sample(self.workers)
        sampled = count_sampled(self._counters, batch)
        self.local_replay_buffer.add(_episode_columns(batch))
        learning_starts = cfg["replay_buffer_config"].get("learning_starts", cfg["learning_starts"])
        if sampled < int(learning_starts):
            return self._last_learner_info
        train_batch = self._replay(int(cfg["train_batch_size"]))
        results = update_learners(self, train_batch)
        self._maybe_update_targets()
        self.workers.sync_weights(global_vars={"timestep": sampled})
        if results is not None:  # (None: `train()` reduces the iteration's results)
            self._last_learner_info = self.learner_info_from(results)
        return self._last_learner_info

    def _replay(self, min_steps: int) -> MultiAgentBatch:
        """Stored batches drawn uniformly until they hold `min_steps` steps (agent steps
        with `multiagent.count_steps_by: agent_steps`), RLlib's
        `sample_min_n_steps_from_buffer`."""
        by_agent = (self.config.get("multiagent") or {}).get("count_steps_by") == "agent_steps"
        drawn: list[MultiAgentBatch] = []
        steps = 0
        while steps < min_steps:
            stored = self.local_replay_buffer.sample()
            drawn.append(stored)
            steps += stored.agent_steps() if by_agent else stored.env_steps()
        return concat_samples(drawn).as_multi_agent()


def _episode_columns(batch: SampleBatch | MultiAgentBatch) -> MultiAgentBatch:
    """The columns QMIX trains on (`EPISODE_COLUMNS`) of each policy's rows."""
    ma_batch = batch.as_multi_agent()
    return MultiAgentBatch(
        {
            pid: SampleBatch({k: b[k] for k in EPISODE_COLUMNS if k in b})
            for pid, b in ma_batch.policy_batches.items()
        },
        ma_batch.env_steps(),
    )


__all__ = ["DEFAULT_CONFIG", "QMixTrainer"]
