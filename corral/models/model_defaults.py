"""Default `"model"` config: every key of RLlib 1.x's catalog `MODEL_DEFAULTS`.

Kept in its own module (no torch import) so the config layer can read it cheaply.
`corral.models.MODEL_DEFAULTS` is this same dict.
"""

from __future__ import annotations

from typing import Any

from corral.utils.deprecation import DEPRECATED_VALUE

MODEL_DEFAULTS: dict[str, Any] = {
    # --- Experimental switches ---
    # Build the framework-native default models instead of the generic wrappers.
    "_use_default_native_models": False,
    # Models receive the observations as the env gives them (possibly nested, discrete
    # parts as values) instead of the preprocessor's flat rows; set from the trainer
    # config's key of the same name (see `COMMON_CONFIG`).
    "_disable_preprocessor_api": False,
    # Previous actions of a Tuple/Dict action space reach the model nested (and the
    # batches keep the actions nested); set from the trainer config's key of the same
    # name (see `COMMON_CONFIG`).
    "_disable_action_flattening": False,
    # --- Fully connected network (the default for flat observations) ---
    # Sizes of the hidden layers of the default MLP.
    "fcnet_hiddens": [256, 256],
    # Activation of those hidden layers: "tanh", "relu", "swish"/"silu" or "linear".
    "fcnet_activation": "tanh",
    # --- Convolutional network (the default for image observations) ---
    # List of [out_channels, kernel, stride] per conv layer; None (or [], as RLlib
    # 1.13's torch nets read it) picks a stack that fits the observation shape.
    "conv_filters": None,
    # Activation between the conv layers.
    "conv_activation": "relu",
    # --- Head on top of the conv (or other) trunk ---
    # Extra dense layers after the trunk and before the output layer.
    "post_fcnet_hiddens": [],
    # Activation of those extra dense layers.
    "post_fcnet_activation": "relu",
    # Learn a state-independent log std for diagonal Gaussian actions: the model
    # then outputs only the means and the log stds are free parameters.
    "free_log_std": False,
    # Make the last hidden layer the output itself (its size must equal the
    # number of action-distribution inputs) instead of adding a linear layer.
    "no_final_linear": False,
    # Share the trunk between the policy and the value-function head. False
    # gives the value function its own copy of the network.
    "vf_share_layers": True,
    # --- Recurrent wrapper (LSTM) ---
    # Wrap the model's output in an LSTM layer.
    "use_lstm": False,
    # Longest sequence (in steps) the recurrent model is trained on.
    "max_seq_len": 20,
    # Hidden size of the LSTM cell.
    "lstm_cell_size": 256,
    # Feed the previous action into the LSTM next to the observation.
    "lstm_use_prev_action": False,
    # Feed the previous reward into the LSTM next to the observation.
    "lstm_use_prev_reward": False,
    # Lay recurrent inputs out as [time, batch, ...] instead of [batch, time, ...].
    "_time_major": False,
    # --- Attention wrapper (GTrXL) ---
    # Wrap the model's output in a gated transformer (GTrXL:
    # `corral.models.torch.attention_net.AttentionWrapper`); policy-gradient algorithms
    # (PPO, A2C/A3C, PG, IMPALA/APPO), which then train on `max_seq_len`-step sequences.
    # Exclusive with `use_lstm`.
    "use_attention": False,
    # Number of transformer units stacked in that wrapper.
    "attention_num_transformer_units": 1,
    # Embedding size inside the transformer units.
    "attention_dim": 64,
    # Number of attention heads per unit.
    "attention_num_heads": 1,
    # Size of each attention head.
    "attention_head_dim": 32,
    # Number of past timesteps each unit attends to (its memory window, carried as the
    # model's state `state_in_<unit>`), acting and training alike.
    "attention_memory_inference": 50,
    # RLlib 1.13's training memory: accepted; training sequences start from the same
    # `attention_memory_inference` window acting used.
    "attention_memory_training": 50,
    # Hidden size of the position-wise MLP inside each unit.
    "attention_position_wise_mlp_dim": 32,
    # Initial bias of the GRU gates (high values start close to identity).
    "attention_init_gru_gate_bias": 2.0,
    # How many previous actions to feed into the attention wrapper (one-hot for discrete
    # spaces, oldest first; zeros before the episode's first step).
    "attention_use_n_prev_actions": 0,
    # How many previous rewards to feed into the attention wrapper.
    "attention_use_n_prev_rewards": 0,
    # --- Image preprocessing (Atari-style observations) ---
    # Stack the last 4 frames into one observation.
    "framestack": True,
    # Resize frames to dim x dim pixels.
    "dim": 84,
    # Convert frames to a single grayscale channel.
    "grayscale": False,
    # Scale pixel values to [-1, 1] (True) or [0, 1] (False).
    "zero_mean": True,
    # --- Custom models ---
    # Name (as registered with the ModelCatalog) or class of a user model.
    "custom_model": None,
    # Extra keyword arguments handed to the custom model's constructor.
    "custom_model_config": {},
    # Name or class of a user action distribution.
    "custom_action_dist": None,
    # A user preprocessor (RLlib 1.13's, deprecated: prefer a gymnasium
    # ObservationWrapper): a name registered with
    # `ModelCatalog.register_custom_preprocessor`, or a `Preprocessor` subclass
    # overriding `_init_shape` and `transform`. It replaces the default preprocessor;
    # the model is built for its `observation_space`. Not for QMIX.
    "custom_preprocessor": None,
    # --- Deprecated ---
    # Old switch setting both `lstm_use_prev_action` and `lstm_use_prev_reward`.
    "lstm_use_prev_action_reward": DEPRECATED_VALUE,
}


def _model_specs() -> dict[str, Any]:
    # Imported here so that this module's import stays as light as it is.
    from corral.utils.config_spec import (
        AnyOf,
        Bool,
        CallableSpec,
        Dict,
        Float,
        Int,
        ListOf,
        OneOf,
        Optional,
        Str,
    )

    activation = OneOf("tanh", "relu", "swish", "silu", "elu", "linear", None, ignore_case=True)
    layers = ListOf(Int(1))
    custom = Optional(AnyOf(Str(), CallableSpec("a registered name or a class")))
    # [out_channels, kernel, stride]; kernel and stride may be [h, w] pairs.
    size = AnyOf(Int(1), ListOf(Int(1), length=2))
    return {
        "_use_default_native_models": Bool(),
        "_disable_preprocessor_api": Bool(),
        "_disable_action_flattening": Bool(),
        "fcnet_hiddens": layers,
        "fcnet_activation": activation,
        "conv_filters": Optional(ListOf(ListOf(size, length=3))),
        "conv_activation": activation,
        "post_fcnet_hiddens": layers,
        "post_fcnet_activation": activation,
        "free_log_std": Bool(),
        "no_final_linear": Bool(),
        "vf_share_layers": Bool(),
        "use_lstm": Bool(),
        "max_seq_len": Int(1),
        "lstm_cell_size": Int(1),
        "lstm_use_prev_action": Bool(),
        "lstm_use_prev_reward": Bool(),
        "_time_major": Bool(),
        "use_attention": Bool(),
        "attention_num_transformer_units": Int(1),
        "attention_dim": Int(1),
        "attention_num_heads": Int(1),
        "attention_head_dim": Int(1),
        "attention_memory_inference": Int(1),
        "attention_memory_training": Int(1),
        "attention_position_wise_mlp_dim": Int(1),
        "attention_init_gru_gate_bias": Float(),
        "attention_use_n_prev_actions": Int(0),
        "attention_use_n_prev_rewards": Int(0),
        "framestack": Bool(),
        "dim": Int(1),
        "grayscale": Bool(),
        "zero_mean": Bool(),
        "custom_model": custom,
        "custom_model_config": Dict(),
        "custom_action_dist": custom,
        "custom_preprocessor": custom,
        "lstm_use_prev_action_reward": AnyOf(OneOf(DEPRECATED_VALUE), Bool()),
    }


# Type and range of each key above (see `corral.utils.config_spec`), checked at
# trainer construction under the path "model.<key>". A key added to MODEL_DEFAULTS
# needs an entry here too (a test checks it).
# Keys a custom model adds have no entry: they are that model's business.
MODEL_SPECS: dict[str, Any] = _model_specs()
