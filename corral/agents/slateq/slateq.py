"""SlateQ: reinforcement learning for slate recommendation, through the classic Trainer API.

Ie et al. 2019, "SlateQ: A Tractable Decomposition for Reinforcement Learning with
Recommendation Sets" (arXiv:1905.12767; IJCAI 2019). A recommender shows the user a
slate of `slate_size` documents out of the candidates; the value of a slate is decomposed
into per-item values weighted by a user choice model, so that one item Q-network learns
from the clicked item alone and the best slate is found by scoring every slate (see
`slateq_torch_policy.py` for the losses, `slateq_torch_model.py` for the networks).

The env speaks RecSim's observation dict ``{"user", "doc", "response"}`` with a
``MultiDiscrete([num_candidates] * slate_size)`` action, as RLlib's RecSim wrappers
produce; corral's own `corral.env.recommender_system.InterestEvolutionEnv`
(``"RecSysInterestEvolution-v0"``) does, without RecSim or TensorFlow.

The training step is the off-policy one (`OffPolicyTrainer`): sample fragments into a
(by default prioritized) replay buffer, replay `train_batch_size` transitions per gradient
step once `learning_starts` env steps were sampled, copy the item network into the target
network every `target_network_update_freq` sampled env steps.
"""

from __future__ import annotations

from typing import Any

from corral.agents.off_policy import (
    PRIORITIZED_BUFFER_TYPE,
    OffPolicyTrainer,
    uses_prioritized_replay,
    with_off_policy_config,
)
from corral.agents.slateq.slateq_torch_model import CHOICE_MODELS
from corral.agents.slateq.slateq_torch_policy import SlateQTorchPolicy
from corral.utils import config_spec as cs

DEFAULT_CONFIG = with_off_policy_config(
    {
        # === Model ===
        # Hidden layers of the item Q-network Qbar(user, document), one MLP applied to
        # each candidate document.
        "fcnet_hiddens_per_candidate": [256, 32],
        # The user choice model that weights the item values into a slate's value:
        # "proportional", RecSim's fixed multinomial proportional model (weights
        # <user, doc> + 1, "no click" 2; RLlib 1.13's), or "learned", the conditional
        # logit model (beta * <user, doc>, a "no click" logit) trained on the observed
        # clicks. The choice model is trained (and `choice_loss` reported) either way.
        "choice_model": "proportional",
        # === Learning ===
        # Copy the item network into the target network every this many sampled env steps.
        "target_network_update_freq": 3200,
        # Target update: target <- tau * online + (1 - tau) * target (1.0: a copy).
        "tau": 1.0,
        # Huber loss of the TD error (instead of the squared error) ...
        "use_huber": False,
        # ... quadratic within this threshold, linear beyond.
        "huber_threshold": 1.0,
        # Learning rate of the item Q-network (centered RMSprop).
        "lr": 0.00025,
        # [[timestep, lr], ...] piecewise-linear schedule of `lr` (None: constant).
        "lr_schedule": None,
        # Learning rate of the user choice model (Adam).
        "lr_choice_model": 1e-3,
        # RMSprop's epsilon.
        "rmsprop_epsilon": 1e-5,
        # Clip each network's gradients to this global norm (None: no clipping).
        "grad_clip": None,
        # Env steps sampled (with the initial exploration) before the first update.
        "learning_starts": 20000,
        # Rewards summed into each target (only 1 is built: the loss reads the response to
        # each transition's own slate).
        "n_step": 1,
        # === Replay buffer ===
        # Prioritized by TD error (rows without a click have none, so they are seldom
        # replayed), 100k transitions (RLlib 1.13's).
        "replay_buffer_config": {"type": PRIORITIZED_BUFFER_TYPE, "capacity": 100000},
        # === Exploration ===
        # Epsilon-greedy over whole slates: random slates for `warmup_timesteps`, then
        # epsilon falls linearly to `final_epsilon` over `epsilon_timesteps`
        # (`SlateSoftQ` samples slates by their Q-values instead).
        "exploration_config": {
            "type": "SlateEpsilonGreedy",
            "warmup_timesteps": 20000,
            "epsilon_timesteps": 250000,
            "final_epsilon": 0.01,
        },
        # Evaluate greedily.
        "evaluation_config": {"explore": False},
        # Minimum env steps per `train()` call.
        "timesteps_per_iteration": 1000,
        # === Sampling ===
        "rollout_fragment_length": 4,
        # Transitions replayed per gradient step.
        "train_batch_size": 32,
    }
)

# Type and range of SlateQ's own keys (the replay keys are in REPLAY_CONFIG_SPECS).
CONFIG_SPECS = {
    "fcnet_hiddens_per_candidate": cs.ListOf(cs.Int(1)),
    "choice_model": cs.OneOf(*CHOICE_MODELS),
    "use_huber": cs.Bool(),
    "huber_threshold": cs.Float(0, lo_open=True),
    "lr_schedule": cs.Schedule(cs.Float(0)),
    "lr_choice_model": cs.Float(0),
    "rmsprop_epsilon": cs.Float(0, lo_open=True),
}


def calculate_round_robin_weights(config: dict[str, Any]) -> list[float]:
    """RLlib 1.13's ratio of sampling to replay rounds: ``[1, 1]``, or with
    `training_intensity` ``[1, training_intensity / (train_batch_size /
    rollout_fragment_length)]``. (corral's training step reads `training_intensity`
    itself: `OffPolicyTrainer.updates_per_env_step`.)"""
    if not config["training_intensity"]:
        return [1, 1]
    native_ratio = config["train_batch_size"] / config["rollout_fragment_length"]
    return [1, config["training_intensity"] / native_ratio]


class SlateQTrainer(OffPolicyTrainer):
    """SlateQ (Ie et al. 2019): slate recommendation by decomposed Q-learning."""

    _name = "SlateQ"
    _default_config = DEFAULT_CONFIG
    _config_specs = CONFIG_SPECS
    _policy_class = SlateQTorchPolicy
    _config_rules = (
        cs.Rule(
            lambda c: c["choice_model"] != "learned" or not uses_prioritized_replay(dict(c)),
            "choice_model='learned' trains the choice model on replayed transitions, and "
            "prioritized replay (by TD error, which is 0 without a click) hardly ever "
            "replays the no-click ones it must learn from: use uniform replay "
            "(replay_buffer_config: {{'type': 'MultiAgentReplayBuffer'}}, "
            "prioritized_replay: False) with it.",
        ),
    )


__all__ = ["DEFAULT_CONFIG", "SlateQTrainer", "calculate_round_robin_weights"]
