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

import numpy as np

from corral.agents.config import merge_trainer_configs
from corral.agents.dqn.dqn_torch_policy import DQNTorchPolicy
from corral.agents.dqn.simple_q import SIMPLE_Q_DEFAULT_CONFIG, SimpleQTrainer
from corral.utils.config_spec import Bool, Float, Int, ListOf, Rule
from corral.utils.deprecation import Deprecated

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


def calculate_rr_weights(config: dict) -> list[float]:
    """RLlib 1.13's round-robin weights of its DQN execution plan's two ops: how many
    store (sample) rounds and how many replay (train) rounds alternate.

    `training_intensity` is the ratio of replayed (trained) rows to sampled env steps;
    one round of each op gives the "native" ratio `train_batch_size / (rollout_fragment_length
    * num_envs_per_worker * (num_workers + 1))` (the local worker counted too). Without a
    `training_intensity`: `[1, 1]`; below the native ratio `[round(native / intensity), 1]`
    sample rounds per train round, else `[1, round(intensity / native)]`. (corral's
    `OffPolicyTrainer.training_step` reads `training_intensity` itself, exactly, as a
    fraction of a gradient step per env step: `updates_per_env_step`.)

    Args:
        config: a trainer config with those keys.

    Returns:
        `[store weight, replay weight]`, e.g. for `Concurrently(...,
        round_robin_weights=...)`.
    """
    intensity = config.get("training_intensity")
    if not intensity:
        return [1, 1]
    sampled = (
        config["rollout_fragment_length"]
        * config["num_envs_per_worker"]
        * max(config["num_workers"] + 1, 1)
    )
    native_ratio = config["train_batch_size"] / sampled
    weight = float(intensity) / native_ratio
    if weight < 1:
        return [int(np.round(1.0 / weight)), 1]
    return [1, int(np.round(weight))]


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


@Deprecated(old="GenericOffPolicyTrainer", new="DQNTrainer", error=False)
class GenericOffPolicyTrainer(DQNTrainer):
    """RLlib 1.13's deprecated name of the DQN trainer (it was the generic off-policy
    trainer DQN was built on); corral's generic one is
    `corral.agents.off_policy.OffPolicyTrainer`. Warns once when instantiated."""
