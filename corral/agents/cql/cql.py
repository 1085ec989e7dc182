"""CQL (Kumar et al. 2020) through the classic Trainer API: offline Q-learning that does not
overrate what the data never shows.

`CQLTrainer` is SAC with CQL's conservative critics (`cql_torch_policy.py`) and RLlib 1.13's
CQL keys; `CQLDQNTrainer` ("CQL_DQN") is DQN with the discrete form of the same regulariser
(`cql_dqn_torch_policy.py`). Both train with the replay loop of `corral.agents.off_policy`:
each step reads a batch from `input` into the replay buffer and trains on replayed rows
(`training_intensity` sets how many per read step; offline data costs nothing to re-read).
"""

from __future__ import annotations

from corral.agents.config import merge_trainer_configs
from corral.agents.cql.cql_dqn_torch_policy import CQLDQNTorchPolicy
from corral.agents.cql.cql_torch_policy import CQLTorchPolicy
from corral.agents.dqn import DEFAULT_CONFIG as DQN_DEFAULT_CONFIG
from corral.agents.dqn import DQNTrainer
from corral.agents.off_policy import REPLAY_COLUMNS, OffPolicyTrainer
from corral.agents.sac import DEFAULT_CONFIG as SAC_DEFAULT_CONFIG
from corral.agents.sac import SACTrainer
from corral.execution.learner_stream import LearnerStream
from corral.policy.torch_mixins import N_STEP
from corral.utils.config_spec import Bool, Float, Int, Spec

# CQL's own keys (RLlib 1.13's), shared by the SAC and DQN forms where they apply.
_CQL_KEYS = {
    # Where the experiences come from: an offline dataset (see COMMON_CONFIG's `input`).
    "input": "sampler",
    # No off-policy estimates by default (the policy is evaluated in an env instead).
    "input_evaluation": [],
    # Weight of the conservative term (log-sum-exp of Q minus Q of the data's actions).
    "min_q_weight": 5.0,
    # Temperature T of the log-sum-exp.
    "temperature": 1.0,
}

CQL_DEFAULT_CONFIG = merge_trainer_configs(
    SAC_DEFAULT_CONFIG,
    {
        **_CQL_KEYS,
        # Gradient steps during which the actor clones the data's actions instead of
        # maximising Q (the critics learn from the start).
        "bc_iters": 20000,
        # Actions sampled per state (uniformly, from pi(.|s) and from pi(.|s')) for the
        # log-sum-exp.
        "num_actions": 10,
        # Learn the conservative weight alpha' (Lagrangian form) instead of fixing it.
        "lagrangian": False,
        # The gap between log-sum-exp Q and the data's Q that alpha' holds (with
        # `lagrangian`).
        "lagrangian_thresh": 5.0,
        # Offline data is read, not sampled: no warm-up before training.
        "learning_starts": 0,
        # Whether the input's actions are already in [-1, 1]: set True for files written
        # by SAC or CQL with `normalize_actions` (their squashed actions are).
        "actions_in_input_normalized": False,
    },
    allow_unknown_configs=True,
)

CQL_DQN_DEFAULT_CONFIG = merge_trainer_configs(
    DQN_DEFAULT_CONFIG,
    {
        **_CQL_KEYS,
        # Offline data is read, not sampled: no warm-up before training.
        "learning_starts": 0,
        # Prioritised replay of offline data only reorders the same rows: off.
        "prioritized_replay": False,
    },
    allow_unknown_configs=True,
)

_CQL_SPECS: dict[str, Spec] = {"min_q_weight": Float(0), "temperature": Float(0, lo_open=True)}
# Type and range of CQL's own keys (SAC's are checked too).
CONFIG_SPECS: dict[str, Spec] = {
    **_CQL_SPECS,
    "bc_iters": Int(0, integral_float_ok=True),
    "num_actions": Int(1),
    "lagrangian": Bool(),
    "lagrangian_thresh": Float(),
}


# The columns of a transition (the replay buffer's, as the CQL losses read them); the
# n-step column is there only when postprocessing added it.
_STREAM_REQUIRED = tuple(c for c in REPLAY_COLUMNS if c != N_STEP)


class _Streaming(OffPolicyTrainer):
    """`stream_to_learners` for the CQL trainers (`corral.execution.learner_stream`):
    each streamed step is one gradient step, then the target networks' update rule."""

    _stream_columns = (REPLAY_COLUMNS, _STREAM_REQUIRED)
    _stream: LearnerStream | None

    def setup(self, config: dict) -> None:
        super().setup(config)
        self._stream = LearnerStream.of(self)

    def training_step(self) -> dict:
        if self._stream is None:
            return super().training_step()
        info = self._stream.training_step(self, after_update=self._maybe_update_targets)
        self._last_learner_info = info
        return info


class CQLTrainer(_Streaming, SACTrainer):
    """Conservative Q-learning on SAC, for Box actions (arXiv:2006.04779)."""

    _name = "CQL"
    _default_config = CQL_DEFAULT_CONFIG
    _config_specs = CONFIG_SPECS
    _policy_class = CQLTorchPolicy


class CQLDQNTrainer(_Streaming, DQNTrainer):
    """Conservative Q-learning on DQN, for Discrete actions (CQL(H), arXiv:2006.04779)."""

    _name = "CQL_DQN"
    _default_config = CQL_DQN_DEFAULT_CONFIG
    _config_specs = _CQL_SPECS
    _policy_class = CQLDQNTorchPolicy
