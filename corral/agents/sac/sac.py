"""SAC (Haarnoja et al. 2018) through the classic Trainer API.

`DEFAULT_CONFIG` keeps RLlib 1.x's SAC keys and defaults; tuned settings live
in `tuned_examples/sac/`. Training is the replay loop of
`corral.agents.off_policy`; the losses are in `sac_torch_policy.py`.
"""

from __future__ import annotations

from collections.abc import Mapping

import gymnasium as gym
import numpy as np

from corral.agents.config_merge import ALLOW_UNKNOWN_SUBKEYS
from corral.agents.off_policy import OffPolicyTrainer, with_off_policy_config
from corral.agents.sac.sac_torch_policy import SACTorchPolicy
from corral.utils import config_spec as cs

# Keys of `Q_model` / `policy_model` (RLlib 1.x's). A `custom_model` (a class, or a name
# registered with `ModelCatalog.register_custom_model`) replaces the dense layers: it is
# built with RLlib's constructor arguments plus `custom_model_config` as keyword
# arguments (see `SACTorchModel` for its spaces and outputs).
_NET_DEFAULTS = {
    "fcnet_hiddens": [256, 256],
    "fcnet_activation": "relu",
    "post_fcnet_hiddens": [],
    "post_fcnet_activation": None,
    "custom_model": None,
    "custom_model_config": {},
}

# RLlib 1.13's list of the config keys its SAC optimizer shares with other off-policy
# trainers (kept for code that reads it; corral's SAC does not use it).
OPTIMIZER_SHARED_CONFIGS = [
    "buffer_size",
    "prioritized_replay",
    "prioritized_replay_alpha",
    "prioritized_replay_beta",
    "prioritized_replay_eps",
    "rollout_fragment_length",
    "train_batch_size",
    "learning_starts",
]

DEFAULT_CONFIG = with_off_policy_config(
    {
        # === Model ===
        # Two Q-networks and the minimum of their targets (clipped double-Q).
        "twin_q": True,
        # Run observations through a `model` network (the catalog's model for the
        # observation space with 256 outputs, or `model`'s `custom_model`) before the Q
        # and policy heads, which then read its output instead of the flattened
        # observations. The critics' loss trains it; the target model has its own copy.
        # (RLlib 1.13's SAC ignored this key: RLlib <= 1.0's and DDPG's behaviour.)
        "use_state_preprocessor": False,
        # The Q-networks: dense layers `fcnet_hiddens` then `post_fcnet_hiddens`, or a
        # `custom_model` per Q-net (on concat(obs, action) for Box actions, with one
        # output; on obs for Discrete ones, with one output per action).
        "Q_model": dict(_NET_DEFAULTS),
        # The policy network, configured like `Q_model` (a `custom_model` outputs
        # concat(mean, log_std) for Box actions, logits for Discrete ones).
        "policy_model": dict(_NET_DEFAULTS),
        # Clip actions to the env's bounds before stepping it (tanh squashing
        # already keeps SAC's actions in bounds).
        "clip_actions": False,
        # === Learning ===
        # Polyak coefficient of the target critics' updates.
        "tau": 5e-3,
        # Initial entropy temperature alpha.
        "initial_alpha": 1.0,
        # Entropy target of the temperature loss: "auto" is -dim(A) for Box actions,
        # 0.98 * -log(1 / |A|) for Discrete ones.
        "target_entropy": "auto",
        # n-step returns for the critics' targets (cut at fragment ends, where the
        # bootstrap is discounted by gamma^k for the k rewards summed).
        "n_step": 1,
        "replay_buffer_config": {"capacity": int(1e6)},
        # Learning rates of the three Adam optimisers.
        "optimization": {
            "actor_learning_rate": 3e-4,
            "critic_learning_rate": 3e-4,
            "entropy_learning_rate": 3e-4,
        },
        # Env steps sampled before the first update.
        "learning_starts": 1500,
        # === Sampling and iterations ===
        "num_gpus": 0,
        "timesteps_per_iteration": 100,
        # Use the policy's mode instead of samples in the losses (for tests).
        "_deterministic_loss": False,
        # Box actions from a Beta distribution on [-1, 1] (mapped onto the env's bounds
        # as the squashed Gaussian's are) instead of the tanh-squashed Gaussian: the
        # policy net outputs the two concentrations (softplus + 1 of its outputs), the
        # actor's loss reparameterises its samples, deterministic actions are its mean,
        # and "auto" `target_entropy` stays -dim(A). Discrete actions ignore it. (RLlib
        # 1.13's SAC put its Beta on [0, 1], only the upper half of the normalised range.)
        # Built for SAC; RNNSAC and CQL refuse it.
        "_use_beta_distribution": False,
        "normalize_actions": True,
        "no_done_at_end": False,
    }
)


def _net_spec() -> cs.Dict:
    activation = cs.OneOf("tanh", "relu", "swish", "silu", "elu", "linear", None, ignore_case=True)
    return cs.Dict(
        {
            "fcnet_hiddens": cs.ListOf(cs.Int(1)),
            "fcnet_activation": activation,
            "post_fcnet_hiddens": cs.ListOf(cs.Int(1)),
            "post_fcnet_activation": activation,
            "custom_model": cs.Optional(cs.AnyOf(cs.Str(), cs.CallableSpec("a model class"))),
            "custom_model_config": cs.Dict(),
        },
        what="a dict of network options",
    )


# Type and range of SAC's own keys (the replay keys are in `REPLAY_CONFIG_SPECS`,
# COMMON_CONFIG's in COMMON_CONFIG_SPECS), checked when the trainer is built.
CONFIG_SPECS = {
    "twin_q": cs.Bool(),
    "use_state_preprocessor": cs.Bool(),
    "Q_model": _net_spec(),
    "policy_model": _net_spec(),
    "tau": cs.Float(0, 1),
    "initial_alpha": cs.Float(0, lo_open=True),
    "target_entropy": cs.AnyOf(cs.OneOf("auto"), cs.Float()),
    "optimization": cs.Dict(
        {
            "actor_learning_rate": cs.Float(0),
            "critic_learning_rate": cs.Float(0),
            "entropy_learning_rate": cs.Float(0),
        },
        what="a dict of the three learning rates",
    ),
    "_deterministic_loss": cs.Bool(),
    "_use_beta_distribution": cs.Bool(),
}


def _net_keys_rule(key: str) -> cs.Rule:
    """`Q_model`/`policy_model` without a `custom_model` sets only the keys of
    `_NET_DEFAULTS`: their keys are merged freely, as RLlib's are, so that a custom model
    can read keys of its own, but a typo must not pass for the dense networks."""

    def holds(config: Mapping) -> bool:
        net = config.get(key)
        if not isinstance(net, Mapping) or net.get("custom_model"):
            return True
        return set(net) <= set(_NET_DEFAULTS)

    return cs.Rule(
        holds,
        f"`{key}` {{{key}}} sets keys its dense networks do not read (they read "
        f"{', '.join(_NET_DEFAULTS)}); other keys are for a `custom_model`.",
    )


class SACTrainerBase(OffPolicyTrainer):
    """What SAC and RNNSAC share: SAC's keys (with their specs and docs) and checks."""

    _config_specs = CONFIG_SPECS
    # As RLlib 1.13's: `Q_model` and `policy_model` take keys of their own (a custom
    # model's `custom_model_config`, or `model` keys it reads), like `model` does.
    _allow_unknown_subkeys = [*ALLOW_UNKNOWN_SUBKEYS, "policy_model", "Q_model"]
    _config_rules: tuple[cs.Rule, ...] = (
        cs.Rule(
            lambda c: _finite_bounds(c.get("action_space")),
            "SAC squashes actions into bounds; {action_space} has infinite bounds.",
        ),
    )


class SACTrainer(SACTrainerBase):
    """Soft Actor-Critic with twin Q-networks and automatic entropy tuning
    (arXiv:1801.01290, arXiv:1812.05905; discrete actions: arXiv:1910.07207)."""

    _name = "SAC"
    _default_config = DEFAULT_CONFIG
    _policy_class = SACTorchPolicy
    _config_rules = (
        _net_keys_rule("Q_model"),
        _net_keys_rule("policy_model"),
    )


def _finite_bounds(space: object) -> bool:
    """Whether a config's `action_space` (if a Box) has finite lower bounds."""
    return not isinstance(space, gym.spaces.Box) or bool(np.all(np.isfinite(space.low)))
