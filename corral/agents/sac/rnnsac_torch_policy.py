"""RNNSAC's policy: SAC's three losses over replayed sequences, with recurrent actor and
critics (RLlib 1.13's `RNNSACTorchPolicy`).

The actor and each critic are LSTM-wrapped networks (`RNNSACTorchModel`), each with its own
recurrent state. A replayed minibatch holds sequences of `max_seq_len + burn_in` steps with
the states recorded at their first step (`zero_init_states`: zeros instead); every network
runs once over each whole sequence. Within a sequence, step t bootstraps from step t + k
(k = 1, or the n-step length; `corral.policy.sequence_steps`), so the critics' targets are

    y_t = r_t + gamma^k (1 - terminated_t) V'(s_{t+k}),
    V'(s) = E_{a ~ pi(.|s)}[min_j Q'_j(s, a) - alpha log pi(a|s)]

(an exact sum over the actions for Discrete ones, one reparameterised sample for Box
ones), with the target critics run over the same sequence from the same state. The
critics' loss is the Huber loss of Q_j(s_t, a_t) - y_t (as RLlib 1.13's), weighted by the
prioritized-replay weights; the actor's and the temperature's are SAC's (see
`sac_torch_policy`); all three are means over the trained steps: after the first `burn_in`
steps (which only warm up the states), before the padding, and with the bootstrap step
inside the sequence unless the episode terminated.

Box actions, as in RLlib 1.13: a critic reads `concat(obs, action)` at every step, so the
actor's loss runs the critics over the sequence with the actor's sampled actions.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.agents.sac.rnnsac_torch_model import NETS, RNNSACTorchModel
from corral.agents.sac.sac_torch_policy import (
    SACTorchPolicy,
    actor_critic_loss,
    squashed_gaussian_sample,
)
from corral.core.learner.training_data import pad_sequences
from corral.policy.sample_batch import SampleBatch
from corral.policy.sequence_steps import SequenceSteps
from corral.policy.torch_policy import TensorDict
from corral.utils.replay_buffers import N_STEP, WEIGHTS

# RLlib 1.13's torch modules export `F`.
F = nn.functional


class RNNSACTorchPolicy(SACTorchPolicy):
    """SAC with recurrent actor and critics, trained on whole replayed sequences.

    The policy's `model.max_seq_len` is the replayed sequences' length (the config's
    `max_seq_len + burn_in`), so that the learner keeps each replayed sequence whole.
    """

    compiled_loss_methods = ("_sequence_losses",)
    beta_distribution_built = False
    train_columns: tuple[str, ...] = (
        SampleBatch.OBS,
        SampleBatch.ACTIONS,
        SampleBatch.REWARDS,
        SampleBatch.TERMINATEDS,
        N_STEP,
        WEIGHTS,
    )

    @staticmethod
    def get_default_config() -> dict:
        """RNNSAC's `DEFAULT_CONFIG` (the keys this policy reads)."""
        from corral.agents.sac.rnnsac import DEFAULT_CONFIG

        return DEFAULT_CONFIG

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        self.burn_in = int(config.get("burn_in", 0))
        self.sequence_length = self.burn_in + int(config["model"]["max_seq_len"])
        config = {**config, "model": {**config["model"], "max_seq_len": self.sequence_length}}
        super().__init__(observation_space, action_space, config)
        self.zero_init_states = bool(config.get("zero_init_states", True))
        if not self._initial_state:
            raise ValueError(
                "RNNSAC needs recurrent networks: set `use_lstm: True` in `policy_model` "
                "and `Q_model`."
            )

    @property
    def target_q(self) -> nn.Module:
        """The target critics (a copy of the model's `critics`)."""
        return self.target_model

    def target_source(self) -> nn.Module:
        """The critics (`update_target` moves the target critics towards them)."""
        return self.model.critics

    def make_model(self, num_outputs: int) -> RNNSACTorchModel:  # type: ignore[override]
        cfg = self.config
        return RNNSACTorchModel(
            self.preprocessor.observation_space,
            self.action_space,
            num_outputs,
            cfg["model"],
            "sac_model",
            policy_model_config=cfg["policy_model"],
            q_model_config=cfg["Q_model"],
            twin_q=cfg["twin_q"],
            initial_alpha=cfg["initial_alpha"],
            target_entropy=cfg["target_entropy"],
        )

    def make_optimizer(self) -> torch.optim.Optimizer:
        """SAC's Adam with three parameter groups (actor, critics, alpha)."""
        lrs, m = self.config["optimization"], self.model
        return self.grouped_adam(
            actor=(m.policy_variables(), lrs["actor_learning_rate"]),
            critic=(m.q_variables(), lrs["critic_learning_rate"]),
            alpha=([m.log_alpha], lrs["entropy_learning_rate"]),
        )

    # -- acting -------------------------------------------------------------

    def compute_actions_from_obs(
        self,
        obs: np.ndarray,
        explore: bool | None = None,
        state: list[np.ndarray] | None = None,
        prev_actions: np.ndarray | None = None,
        prev_rewards: np.ndarray | None = None,
        view_inputs: dict[str, np.ndarray] | None = None,
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """One step of the actor and of each critic (whose states are carried as well, as
        in RLlib 1.13; a Box critic steps on the action taken) from `state` (the initial
        state when None); adds `state_out_<i>` to the fetches."""
        if explore is None:
            explore = bool(self.config.get("explore", True))
        n = len(obs)
        if state is None:
            state = [np.repeat(s[None], n, axis=0) for s in self._initial_state]
        m = self.model
        with torch.inference_mode():
            inputs: dict[str, Any] = {SampleBatch.OBS: torch.from_numpy(obs).reshape(n, -1)}
            for key, value in (
                (SampleBatch.PREV_ACTIONS, prev_actions),
                (SampleBatch.PREV_REWARDS, prev_rewards),
            ):
                inputs[key] = torch.as_tensor(np.zeros(n) if value is None else np.asarray(value))
            model_out, _ = m(inputs, [], None)
            states = m.select_state([torch.as_tensor(np.asarray(s)) for s in state], list(NETS))
            seq_lens = torch.ones(n, dtype=torch.int32)
            dist_inputs, state_out = m.get_action_model_outputs(
                model_out, states["policy"], seq_lens
            )
            actions, extra = self.sample_actions(dist_inputs, bool(explore))
            taken = None if self.discrete else torch.from_numpy(actions)
            for net, name in zip(m.critics, NETS[1:]):
                _, critic_state = m.critic_values(net, model_out, states[name], seq_lens, taken)
                state_out += critic_state
        for i, s in enumerate(state_out):
            extra[f"state_out_{i}"] = s.numpy()
        return actions, extra

    # -- learning -----------------------------------------------------------

    def loss_terms(self, batch: TensorDict) -> dict[str, torch.Tensor]:
        """SAC's losses and stats on a minibatch of padded sequences (SAC's `learn_step`
        and `loss` train on them)."""
        return self._sequence_losses(batch)[0]

    def _sequence_losses(self, batch: TensorDict) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """(SAC's losses and stats, mean |TD error| of each sequence `[B]`) for padded
        sequences: rows `[B * T]` with `seq_mask`, and per sequence `seq_lens` and
        `state_in_<i>`."""
        m = self.model
        steps = SequenceSteps.of(batch, self.gamma, self.burn_in)
        seq_lens = batch[SampleBatch.SEQ_LENS]
        state = [batch[f"state_in_{i}"] for i in range(len(self._initial_state))]
        if self.zero_init_states:
            state = [torch.zeros_like(s) for s in state]
        states = m.select_state(state, list(NETS))
        critic_states = [states[name] for name in NETS[1 : 1 + len(m.critics)]]
        model_out, _ = m(batch, [], seq_lens)
        dist_inputs, _ = m.get_action_model_outputs(model_out, states["policy"], seq_lens)
        alpha = m.log_alpha.detach().exp()
        rewards = steps.per_step(batch[SampleBatch.REWARDS].float())

        def critics(
            nets: nn.ModuleList, actions: torch.Tensor | None = None, detach: bool = False
        ) -> torch.Tensor:
            """`[E, B, T, out]`: each critic of `nets` over the sequences."""
            return torch.stack(
                [
                    steps.per_step(m.critic_values(net, model_out, s, seq_lens, actions, detach)[0])
                    for net, s in zip(nets, critic_states)
                ]
            )

        if self.discrete:
            # Exact expectations over the actions (Christodoulou 2019, eqs. 10-12).
            log_pi = steps.per_step(torch.log_softmax(dist_inputs, dim=-1))
            pi = log_pi.exp()
            with torch.no_grad():
                next_q = critics(self.target_q).amin(0)
                value = (pi * (next_q - alpha * log_pi)).sum(-1)
                target = rewards + steps.discount * steps.at_next_step(value)
            q_all = critics(m.critics)
            taken = steps.per_step(batch[SampleBatch.ACTIONS].long())
            index = taken[None, :, :, None].expand(q_all.shape[0], -1, -1, 1)
            q = q_all.gather(-1, index).squeeze(-1)
            actor_per_step = (pi * (alpha * log_pi - q_all.detach().amin(0))).sum(-1)
            neg_entropy = (pi * log_pi).sum(-1)
        else:
            actions_pi, logp = squashed_gaussian_sample(dist_inputs, self.deterministic_loss)
            logp_pi = steps.per_step(logp)
            with torch.no_grad():
                next_q = critics(self.target_q, actions_pi).squeeze(-1).amin(0)
                target = rewards + steps.discount * steps.at_next_step(next_q - alpha * logp_pi)
            q = critics(m.critics, batch[SampleBatch.ACTIONS].float()).squeeze(-1)
            # The actor's gradient reaches it through a; it does not train the critics.
            q_pi = critics(m.critics, actions_pi, detach=True).squeeze(-1).amin(0)
            actor_per_step = alpha * logp_pi - q_pi
            neg_entropy = logp_pi

        td_error = q - target
        huber = F.huber_loss(td_error, torch.zeros_like(td_error), reduction="none")
        # One loss per critic (RLlib 1.13's list), summed: they share no parameters.
        critic_losses = torch.stack([steps.weighted_mean(h) for h in huber])
        # J(alpha) = E[-alpha (log pi + H_target)] (eq. 18 of 1812.05905), in log space.
        alpha_per_step = -m.log_alpha * (neg_entropy.detach() + m.target_entropy)
        stats = {
            "actor_loss": steps.mean(actor_per_step),
            "critic_loss": critic_losses.sum(),
            "critic_losses": critic_losses,
            "alpha_loss": steps.mean(alpha_per_step),
            "alpha_value": alpha[0],
            "entropy": -steps.mean(neg_entropy.detach()),
            "mean_q": steps.mean(q.detach()[0]),
            "mean_td_error": steps.mean(td_error.detach().abs().mean(0)),
        }
        return stats, steps.per_sequence_mean(td_error.detach().abs().mean(0))

    def td_errors(self, batch: SampleBatch) -> np.ndarray:
        """Mean |TD error| (over the critics) of each replayed sequence of `batch` (rows
        of whole sequences, each its own `eps_id`), for prioritized replay."""
        columns = [*self.train_columns, SampleBatch.PREV_ACTIONS, SampleBatch.PREV_REWARDS]
        rows, per_seq = pad_sequences(
            batch, columns, len(self._initial_state), self.sequence_length
        )
        with torch.no_grad():
            _, td_per_sequence = self._sequence_losses({**rows, **per_seq})
        return td_per_sequence.numpy()


def build_rnnsac_model(
    policy: RNNSACTorchPolicy, obs_space: gym.Space, action_space: gym.Space, config: dict
) -> RNNSACTorchModel:
    """RLlib 1.13's RNNSAC model builder: a new `RNNSACTorchModel` as the policy builds it
    (from its own config). The policy's model and target critics exist already (built in
    `__init__`); this leaves them as they are."""
    return policy.make_model(0)


def build_sac_model_and_action_dist(
    policy: RNNSACTorchPolicy, obs_space: gym.Space, action_space: gym.Space, config: dict
) -> tuple[RNNSACTorchModel, type]:
    """`(build_rnnsac_model(...), the actor's distribution class)` (RLlib 1.13's)."""
    return build_rnnsac_model(policy, obs_space, action_space, config), policy.action_dist_class()


def action_distribution_fn(
    policy: RNNSACTorchPolicy,
    model: RNNSACTorchModel,
    input_dict: Any,
    *,
    state_batches: list | None = None,
    seq_lens: Any = None,
    prev_action_batch: Any = None,
    prev_reward_batch: Any = None,
    explore: bool | None = None,
    timestep: int | None = None,
    is_training: bool | None = None,
) -> tuple[torch.Tensor, type, list]:
    """RLlib 1.13's `(distribution inputs, distribution class, state_out)` of the recurrent
    actor: each row one step from its state in `state_batches` (the policy's state
    layout: the actor's, then each critic's; default: the initial state); `state_out` is
    the actor's next state."""
    obs = input_dict[SampleBatch.OBS] if isinstance(input_dict, dict) else input_dict
    obs = torch.as_tensor(np.asarray(obs) if not torch.is_tensor(obs) else obs)
    n = len(obs)
    if state_batches is None:
        state_batches = [np.repeat(s[None], n, axis=0) for s in policy.get_initial_state()]
    states = model.select_state([torch.as_tensor(np.asarray(s)) for s in state_batches], list(NETS))
    if seq_lens is None:
        seq_lens = torch.ones(n, dtype=torch.int32)
    model_out, _ = model({SampleBatch.OBS: obs.reshape(n, -1)}, [], None)
    dist_inputs, state_out = model.get_action_model_outputs(
        model_out, states["policy"], torch.as_tensor(seq_lens)
    )
    return dist_inputs, policy.action_dist_class(), list(state_out)


__all__ = [
    "F",
    "RNNSACTorchPolicy",
    "action_distribution_fn",
    "actor_critic_loss",
    "build_rnnsac_model",
    "build_sac_model_and_action_dist",
]
