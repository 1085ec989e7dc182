"""DDPG (Lillicrap et al. 2015) through the classic Trainer API.

`DEFAULT_CONFIG` keeps RLlib 1.x's DDPG keys and defaults (TD3's settings are
in `td3.py`). Training is the replay loop of `corral.agents.off_policy`; the
losses are in `ddpg_torch_policy.py`.
"""

from __future__ import annotations

from corral.agents.ddpg.ddpg_torch_policy import DDPGTorchPolicy
from corral.agents.off_policy import OffPolicyTrainer, with_off_policy_config
from corral.utils.config_spec import Bool, Float, Int, ListOf, OneOf

DEFAULT_CONFIG = with_off_policy_config(
    {
        # === TD3 switches (all off for DDPG) ===
        # Two critics and the minimum of their targets (clipped double-Q).
        "twin_q": False,
        # Update the actor (and the targets) once per this many critic updates.
        "policy_delay": 1,
        # Add clipped noise to the target actor's actions (target policy smoothing).
        "smooth_target_policy": False,
        # Standard deviation of that noise, in the policy's action units.
        "target_noise": 0.2,
        # Clip of that noise.
        "target_noise_clip": 0.5,
        # === Evaluation ===
        "evaluation_interval": None,
        "evaluation_num_episodes": 10,
        # === Model ===
        # Run observations through a `model` network (the catalog's model for the
        # observation space with 256 outputs, or `model`'s `custom_model`) before the
        # actor and critics, which then read its output instead of the flattened
        # observations. The critics' loss trains it (RLlib 1.13's torch DDPG left it
        # out of both optimisers); the target model has its own copy.
        "use_state_preprocessor": False,
        # The actor's dense layers (on the observations, or the state preprocessor's
        # output) and their activation.
        "actor_hiddens": [400, 300],
        "actor_hidden_activation": "relu",
        # Each critic's dense layers (on that input and the action) and their activation.
        "critic_hiddens": [400, 300],
        "critic_hidden_activation": "relu",
        # n-step returns for the critics' targets.
        "n_step": 1,
        # === Exploration ===
        "exploration_config": {
            # Ornstein-Uhlenbeck noise (temporally correlated), as in the DDPG paper.
            "type": "OrnsteinUhlenbeckNoise",
            # Uniform random actions for this many timesteps first.
            "random_timesteps": 1000,
            # The process value times this (times the action range) is added.
            "ou_base_scale": 0.1,
            "ou_theta": 0.15,
            "ou_sigma": 0.2,
            # The noise scale decays linearly from initial to final over scale_timesteps.
            "initial_scale": 1.0,
            "final_scale": 0.02,
            "scale_timesteps": 10000,
        },
        "timesteps_per_iteration": 1000,
        # Evaluate the deterministic actor.
        "evaluation_config": {"explore": False},
        # === Replay buffer ===
        # Prioritized replay (Schaul et al. 2016), as in RLlib 1.x's DDPG.
        "prioritized_replay": True,
        # === Optimisation ===
        # Learning rate of the critic's (Q-networks') Adam optimiser.
        "critic_lr": 1e-3,
        # Learning rate of the actor's (policy network's) Adam optimiser.
        "actor_lr": 1e-3,
        # Polyak coefficient of the target updates (after each actor update, with
        # `target_network_update_freq: 0`).
        "tau": 0.002,
        # Huber instead of squared TD errors in the critic loss, with this threshold.
        "use_huber": False,
        "huber_threshold": 1.0,
        # Weight of the L2 penalty on the actor's and critics' weight matrices.
        "l2_reg": 1e-6,
        # Env steps sampled before the first update.
        "learning_starts": 1500,
    }
)

_ACTIVATION = OneOf("tanh", "relu", "swish", "silu", "elu", "linear", None, ignore_case=True)

# Type and range of DDPG's (and TD3's) own keys (the replay keys are in
# `REPLAY_CONFIG_SPECS`), checked when the trainer is built.
CONFIG_SPECS = {
    "twin_q": Bool(),
    "policy_delay": Int(1),
    "smooth_target_policy": Bool(),
    "target_noise": Float(0),
    "target_noise_clip": Float(0),
    "use_state_preprocessor": Bool(),
    "actor_hiddens": ListOf(Int(1)),
    "actor_hidden_activation": _ACTIVATION,
    "critic_hiddens": ListOf(Int(1)),
    "critic_hidden_activation": _ACTIVATION,
    "critic_lr": Float(0),
    "actor_lr": Float(0),
    "tau": Float(0, 1),
    "use_huber": Bool(),
    "huber_threshold": Float(0, lo_open=True),
    "l2_reg": Float(0),
}


class DDPGTrainer(OffPolicyTrainer):
    """Deep Deterministic Policy Gradient (arXiv:1509.02971); TD3 by configuration."""

    _name = "DDPG"
    _default_config = DEFAULT_CONFIG
    _config_specs = CONFIG_SPECS
    _policy_class = DDPGTorchPolicy
