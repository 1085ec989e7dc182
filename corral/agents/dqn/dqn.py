"""DQN with RLlib 1.x's Rainbow-style options, through the classic Trainer API.

Mnih et al. 2015 (DQN) plus, each switched by a config key: double
Q-learning (van Hasselt et al. 2016), dueling networks (Wang et al. 2016),
n-step returns, prioritized replay (Schaul et al. 2016), distributional C51
(Bellemare et al. 2017) and noisy nets (Fortunato et al. 2018). The loss is
in `dqn_torch_policy.py`; the training step is `SimpleQTrainer`'s.
`DEFAULT_CONFIG` keeps RLlib 1.x's defaults; tuned settings live in
`tuned_examples/dqn/`.
"""

from __future__ import annotations

from corral.agents.config import merge_trainer_configs
from corral.agents.dqn.dqn_torch_policy import DQNTorchPolicy
from corral.agents.dqn.simple_q import SIMPLE_Q_DEFAULT_CONFIG, SimpleQTrainer
from corral.utils.config_spec import Bool, Float, Int, ListOf, Rule

DEFAULT_CONFIG = merge_trainer_configs(
    SIMPLE_Q_DEFAULT_CONFIG,
    {
        # === Model ===
        # Atoms of the return distribution; > 1 turns on distributional C51.
        "num_atoms": 1,
        # Support [v_min, v_max] of the return distribution (C51).
        "v_min": -10.0,
        "v_max": 10.0,
        # NoisyNet layers in the Q-head (exploration by learned weight noise).
        "noisy": False,
        # Initial noise scale of the noisy layers.
        "sigma0": 0.5,
        # Separate value and advantage streams (dueling architecture).
        "dueling": True,
        # Hidden layers of the Q-head (and of the value stream), after the
        # `model`'s fcnet_hiddens trunk.
        "hiddens": [256],
        # Pick the next action with the online network, score it with the target.
        "double_q": True,
        # Steps of reward summed into each target (n-step returns).
        "n_step": 1,
        # === Prioritized replay ===
        # Sample transitions in proportion to |TD error|^alpha (see `OFF_POLICY_CONFIG`
        # in `corral.agents.off_policy` for the other `prioritized_replay_*` keys).
        "prioritized_replay": True,
    },
    allow_unknown_configs=True,
)

# Type and range of DQN's own keys (Simple Q's and the replay keys are checked too).
CONFIG_SPECS = {
    "num_atoms": Int(1),
    "v_min": Float(),
    "v_max": Float(),
    "noisy": Bool(),
    "sigma0": Float(0),
    "dueling": Bool(),
    "hiddens": ListOf(Int(1)),
    "double_q": Bool(),
}


class DQNTrainer(SimpleQTrainer):
    """DQN with double Q, dueling heads, n-step, prioritized replay, C51 and noisy nets."""

    _name = "DQN"
    _default_config = DEFAULT_CONFIG
    _config_specs = CONFIG_SPECS
    _policy_class = DQNTorchPolicy
    _config_rules = (
        Rule(
            lambda c: c["num_atoms"] == 1 or c["v_min"] < c["v_max"],
            "C51 needs v_min < v_max, got v_min={v_min}, v_max={v_max}.",
        ),
    )
