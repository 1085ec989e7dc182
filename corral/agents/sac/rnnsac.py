"""RNNSAC: SAC with recurrent (LSTM) actor and critics trained on replayed sequences.

RLlib 1.13's `RNNSACTrainer`: SAC (`sac.py`) whose `policy_model` and `Q_model` are
LSTM-wrapped networks (`use_lstm: True` in both, each with its own recurrent state), with
the sequence replay of R2D2 (`corral.agents.sequence_replay`): complete episodes are cut
into non-overlapping sequences of `model.max_seq_len + burn_in` steps stored with the
networks' states at their first step (`replay_buffer_config.capacity` counts sequences);
each gradient step replays `train_batch_size // replay_sequence_length` whole sequences.
The losses are in `rnnsac_torch_policy.py`.
"""

from __future__ import annotations

from collections.abc import Mapping

from corral.agents.config import merge_trainer_configs
from corral.agents.sac.rnnsac_torch_policy import RNNSACTorchPolicy
from corral.agents.sac.sac import _NET_DEFAULTS, SACTrainerBase, _net_spec
from corral.agents.sac.sac import DEFAULT_CONFIG as SAC_DEFAULT_CONFIG
from corral.agents.sequence_replay import (
    SequenceReplayMixin,
    sequence_rules,
    set_replay_sequence_length,
)
from corral.utils import config_spec as cs

DEFAULT_CONFIG = merge_trainer_configs(
    SAC_DEFAULT_CONFIG,
    {
        # Must be "complete_episodes": sequences are cut from whole episodes.
        "batch_mode": "complete_episodes",
        # True: each replayed sequence starts from zero recurrent states. False: from the
        # states recorded when its first step was sampled.
        "zero_init_states": True,
        # The first `burn_in` steps of each replayed sequence only run the recurrent
        # states forward (from zeros or the stored states) and are left out of the
        # losses: they are over `max_seq_len` steps of each `max_seq_len + burn_in`.
        "burn_in": 0,
        # Set automatically to model.max_seq_len + burn_in (as
        # `replay_buffer_config.replay_sequence_length`): leave it at -1.
        "replay_sequence_length": -1,
        "replay_buffer_config": {
            # Size of the replay buffer in sequences (not timesteps).
            "capacity": int(1e6),
            # Set automatically to model.max_seq_len + burn_in: leave it at -1.
            "replay_sequence_length": -1,
        },
    },
    allow_unknown_configs=True,
)

# The keys of `policy_model` / `Q_model` besides SAC's: the LSTM wrapper's (RLlib 1.13's
# model keys; `use_lstm: True` is required in both).
_LSTM_KEYS = {
    "use_lstm": cs.Bool(),
    "lstm_cell_size": cs.Int(1),
    "lstm_use_prev_action": cs.Bool(),
    "lstm_use_prev_reward": cs.Bool(),
    "max_seq_len": cs.Int(1),
    "_time_major": cs.Bool(),
}


def _recurrent_net_spec() -> cs.Dict:
    spec = _net_spec()
    return cs.Dict({**spec.keys, **_LSTM_KEYS}, what="a dict of network options")


# Type and range of RNNSAC's own keys (SAC's and the replay keys are checked too).
RNNSAC_CONFIG_SPECS = {
    "Q_model": _recurrent_net_spec(),
    "policy_model": _recurrent_net_spec(),
    "zero_init_states": cs.Bool(),
    "burn_in": cs.Int(0),
    "replay_sequence_length": cs.Int(-1),
}


def _recurrent_net_rule(key: str) -> cs.Rule:
    """`policy_model` / `Q_model` must be LSTM-wrapped and, without a `custom_model`, set
    only keys their networks read."""
    known = set(_NET_DEFAULTS) | set(_LSTM_KEYS)

    def holds(config: Mapping) -> bool:
        net = config.get(key)
        if not isinstance(net, Mapping):
            return True
        return bool(net.get("use_lstm")) and (bool(net.get("custom_model")) or set(net) <= known)

    return cs.Rule(
        holds,
        f"RNNSAC needs `{key}` to be recurrent (`use_lstm: True`) and, without a "
        f"custom_model, to set only keys its networks read ({', '.join(sorted(known))}); "
        f"got {{{key}}}.",
    )


class RNNSACTrainer(SequenceReplayMixin, SACTrainerBase):
    """SAC with LSTM actor and critics on replayed sequences (RLlib 1.13's RNNSAC).

    (Beside `SACTrainer`, not below it: SAC's config rules reject the LSTM keys of
    `policy_model` / `Q_model`; both share SAC's keys and checks through
    `SACTrainerBase`.)
    """

    _name = "RNNSAC"
    _default_config = DEFAULT_CONFIG
    _config_specs = RNNSAC_CONFIG_SPECS
    _policy_class = RNNSACTorchPolicy
    _config_rules = (
        *sequence_rules("RNNSAC"),
        cs.Rule(
            lambda c: not c.get("use_state_preprocessor"),
            "RNNSAC's networks read the observations: use_state_preprocessor is not built "
            "for it (got {use_state_preprocessor!r}).",
        ),
        _recurrent_net_rule("Q_model"),
        _recurrent_net_rule("policy_model"),
    )

    def validate_config(self, config: dict) -> None:
        """SAC's checks and RLlib 1.13's: sets `replay_buffer_config.replay_sequence_length`
        (and the top-level `replay_sequence_length`) to `model.max_seq_len + burn_in`."""
        length = int(config["burn_in"]) + int(config["model"]["max_seq_len"])
        if config.get("replay_sequence_length", -1) not in (-1, length):
            raise ValueError(
                "`replay_sequence_length` is set automatically to model.max_seq_len + "
                f"burn_in = {length}; leave it at -1 (got {config['replay_sequence_length']!r})."
            )
        super().validate_config(config)
        config["replay_sequence_length"] = set_replay_sequence_length(config)


__all__ = ["DEFAULT_CONFIG", "RNNSACTrainer"]
