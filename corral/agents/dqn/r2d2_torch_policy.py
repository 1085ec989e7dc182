"""R2D2's policy: DQN's recurrent Q-network trained on replayed sequences.

Kapturowski et al. 2019, "Recurrent Experience Replay in Distributed Reinforcement
Learning" (ICLR): an LSTM Q-network (the `model.use_lstm` wrapper, with DQN's dueling head
on its output) is trained on sequences of `max_seq_len + burn_in` steps replayed together
with the recurrent state recorded at their first step (`zero_init_states`: from zeros
instead). Within a sequence, the target of step t is the step t + k of the same sequence
(k = 1, or the n-step length):

    y_t = h(R_t + gamma^k (1 - terminated_t) h^-1(Q_target(s_{t+k}, a*))),
    a* = argmax_a Q(s_{t+k}, a)  (double Q; else argmax of Q_target),

with the value rescaling h(x) = sign(x)(sqrt(|x| + 1) - 1) + eps x (Pohlen et al. 2018,
arXiv:1805.11593, eq. 9; `use_h_function`, eps = `h_function_epsilon`). The loss is the
Huber loss of Q(s_t, a_t) - y_t, weighted by the prioritized-replay weight of the
sequence and averaged over the steps that have a target: after the first `burn_in` steps
(they only warm up the recurrent state), before the sequence's padding, and with the step
t + k inside the sequence unless the episode terminated. A sequence's priority is the mean
|TD error| over those steps.
"""

from __future__ import annotations

from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.agents.dqn.dqn_torch_model import DQNTorchModel
from corral.agents.dqn.dqn_torch_policy import (
    ComputeTDErrorMixin,
    DQNTorchPolicy,
    before_loss_init,
    build_q_stats,
    extra_action_out_fn,
    grad_process_and_td_error_fn,
    huber_loss,
    q_model_and_distribution,
    setup_early_mixins,
)
from corral.core.learner.training_data import pad_sequences
from corral.models import ModelCatalog
from corral.models.torch.torch_modelv2 import ModelConfigDict, TorchModelV2
from corral.policy.policy_template import class_loss
from corral.policy.sample_batch import SampleBatch
from corral.policy.sequence_steps import SequenceSteps
from corral.policy.torch_policy import TensorDict
from corral.utils.replay_buffers import N_STEP, WEIGHTS

# RLlib 1.13's torch modules export `F`.
F = nn.functional


def h_function(x: torch.Tensor, epsilon: float = 1.0) -> torch.Tensor:
    """The value rescaling h(x) = sign(x) (sqrt(|x| + 1) - 1) + epsilon x.

    It squashes large returns (about sqrt(|x|)) so that one network fits targets of very
    different scales, and stays invertible (`h_inverse`) for epsilon > 0.
    """
    return torch.sign(x) * (torch.sqrt(torch.abs(x) + 1.0) - 1.0) + epsilon * x


def h_inverse(x: torch.Tensor, epsilon: float = 1.0) -> torch.Tensor:
    """The inverse of `h_function` (Pohlen et al. 2018, proposition A.2).

    Solving h(z) = y for z >= 0 (y = |x|) with u = sqrt(z + 1) gives the quadratic
    epsilon u^2 + u - (1 + epsilon + y) = 0, so

        h^-1(x) = sign(x) [((sqrt(1 + 4 epsilon (|x| + 1 + epsilon)) - 1) / (2 epsilon))^2 - 1].
    """
    u = (torch.sqrt(1.0 + 4.0 * epsilon * (torch.abs(x) + 1.0 + epsilon)) - 1.0) / (2.0 * epsilon)
    return torch.sign(x) * (u * u - 1.0)


class R2D2TorchModel(TorchModelV2):
    """`model.use_lstm`'s LSTM (on the `fcnet_hiddens` trunk) under DQN's Q-head.

    The LSTM wrapper comes from the `ModelCatalog` without outputs of its own (its output
    is the LSTM's), and a `DQNTorchModel` without a trunk maps those features to Q-values
    (`hiddens`, `dueling`, `noisy` as in DQN). `forward` returns the Q-values of every row
    and the recurrent state after each sequence.
    """

    def __init__(
        self,
        obs_space: gym.Space,
        action_space: gym.Space,
        num_outputs: int,
        model_config: ModelConfigDict,
        name: str,
        *,
        q_hiddens: list[int],
        dueling: bool,
        noisy: bool = False,
        sigma0: float = 0.5,
    ) -> None:
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        # No outputs of its own (None): the LSTM wrapper's output is the LSTM's.
        self.recurrent: Any = ModelCatalog.get_model_v2(
            obs_space,
            action_space,
            None,  # type: ignore[arg-type]
            model_config,
            framework="torch",
            name=f"{name}_lstm",
        )
        features = gym.spaces.Box(-np.inf, np.inf, (int(self.recurrent.num_outputs),), np.float32)
        self.q_head = DQNTorchModel(
            features,
            action_space,
            int(cast(gym.spaces.Discrete, action_space).n),
            {"fcnet_hiddens": []},
            f"{name}_q",
            q_hiddens=list(q_hiddens),
            dueling=dueling,
            use_noisy=noisy,
            sigma0=sigma0,
        )
        self.view_requirements = {**self.view_requirements, **self.recurrent.view_requirements}
        self._last_rows = 0

    def get_initial_state(self) -> list[Any]:
        return list(self.recurrent.get_initial_state())

    def forward(
        self,
        input_dict: dict[str, torch.Tensor],
        state: list[torch.Tensor],
        seq_lens: torch.Tensor | None,
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Q-values `[B * T, num_actions]` and the state after each sequence."""
        features, state_out = self.recurrent(input_dict, state, seq_lens)
        q = self.q_head.q_logits(features)
        self._last_rows = q.shape[0]
        return q, state_out

    def value_function(self) -> torch.Tensor:
        return torch.zeros(self._last_rows)

    def forward_inference_rnn(
        self,
        obs: torch.Tensor,
        state_in: list[Any],
        prev_action: Any = None,
        prev_reward: Any = None,
    ) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """One step for `N` envs (the sampler's fast path): `(Q-values [N, A], zeros [N],
        state_out)`."""
        features, _, state_out = self.recurrent.forward_inference_rnn(
            obs, state_in, prev_action, prev_reward
        )
        q, zeros = self.q_head.forward_inference(features)
        return q, zeros, state_out


class R2D2TorchPolicy(DQNTorchPolicy):
    """DQN's policy with a recurrent Q-network trained on whole replayed sequences.

    The policy's `model.max_seq_len` is the replayed sequences' length (the config's
    `max_seq_len + burn_in`), so that the learner keeps each replayed sequence whole.
    """

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
        """R2D2's `R2D2_DEFAULT_CONFIG` (the keys this policy reads)."""
        from corral.agents.dqn.r2d2 import R2D2_DEFAULT_CONFIG

        return R2D2_DEFAULT_CONFIG

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        model_config = config["model"]
        if not model_config.get("use_lstm"):
            raise ValueError(
                "R2D2 needs a recurrent Q-network: set `model: {use_lstm: True}` (got "
                f"use_lstm={model_config.get('use_lstm')!r}; attention nets are not built "
                "for R2D2)."
            )
        self.burn_in = int(config.get("burn_in", 0))
        self.sequence_length = self.burn_in + int(model_config["max_seq_len"])
        config = {**config, "model": {**model_config, "max_seq_len": self.sequence_length}}
        super().__init__(observation_space, action_space, config)
        self.zero_init_states = bool(config.get("zero_init_states", True))
        self.use_h_function = bool(config.get("use_h_function", True))
        self.h_epsilon = float(config.get("h_function_epsilon", 1e-3))

    def make_model(self, num_outputs: int) -> TorchModelV2:
        q = self.q_config
        return R2D2TorchModel(
            self.preprocessor.observation_space,
            self.action_space,
            num_outputs,
            self.config["model"],
            "q_model",
            q_hiddens=list(q["hiddens"]),
            dueling=q["dueling"],
            noisy=q["noisy"],
            sigma0=q["sigma0"],
        )

    # -- loss ---------------------------------------------------------------

    def loss(
        self, model: torch.nn.Module, dist_class: type, train_batch: TensorDict
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        loss, td_per_sequence, q_selected = self._sequence_loss(model, train_batch)
        if self._td_error_log is not None:
            self._td_error_log.append(td_per_sequence)
        with torch.no_grad():
            stats = {
                "loss": loss.detach(),
                "mean_q": q_selected.mean() if len(q_selected) else torch.zeros(()),
                "min_q": q_selected.min() if len(q_selected) else torch.zeros(()),
                "max_q": q_selected.max() if len(q_selected) else torch.zeros(()),
                "mean_td_error": td_per_sequence.mean(),
                "cur_lr": float(self.cur_lr),
            }
        return loss, stats

    def _sequence_loss(
        self, model: torch.nn.Module, batch: TensorDict
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(loss, mean |TD error| per sequence [B], Q(s, a) of the trained steps) for
        padded sequences: rows `[B * T]` with `seq_mask`, and per sequence `seq_lens` and
        `state_in_<i>`."""
        steps = SequenceSteps.of(batch, self.gamma, self.burn_in)
        state = [batch[f"state_in_{i}"] for i in range(len(self._initial_state))]
        if self.zero_init_states:
            state = [torch.zeros_like(s) for s in state]
        q, _ = model(batch, state, batch[SampleBatch.SEQ_LENS])
        q = steps.per_step(q)
        actions = steps.per_step(batch[SampleBatch.ACTIONS].long()).unsqueeze(-1)
        q_selected = q.gather(-1, actions).squeeze(-1)

        with torch.no_grad():
            q_target, _ = self.target_model(batch, state, batch[SampleBatch.SEQ_LENS])
            q_target = steps.per_step(q_target)
            best = (q if self.q_config["double_q"] else q_target).argmax(-1, keepdim=True)
            # Step t bootstraps from step t + k of its sequence (k: its n-step length).
            q_next = steps.at_next_step(q_target.gather(-1, best).squeeze(-1))
            rewards = steps.per_step(batch[SampleBatch.REWARDS].float())
            if self.use_h_function:
                eps = self.h_epsilon
                target = h_function(rewards + steps.discount * h_inverse(q_next, eps), eps)
            else:
                target = rewards + steps.discount * q_next

        td_error = q_selected - target
        loss = steps.weighted_mean(huber_loss(td_error))
        with torch.no_grad():
            td_per_sequence = steps.per_sequence_mean(td_error.abs())
        return loss, td_per_sequence, q_selected.detach()[steps.mask]

    def td_errors(self, batch: SampleBatch) -> np.ndarray:
        """Mean |TD error| of each replayed sequence of `batch` (rows of whole sequences,
        each its own `eps_id`), for prioritized replay."""
        columns = [*self.train_columns, SampleBatch.PREV_ACTIONS, SampleBatch.PREV_REWARDS]
        rows, per_seq = pad_sequences(
            batch, columns, len(self._initial_state), self.sequence_length
        )
        with torch.no_grad():
            _, td_per_sequence, _ = self._sequence_loss(self.model, {**rows, **per_seq})
        return td_per_sequence.numpy()


def r2d2_loss(
    policy: R2D2TorchPolicy,
    model: torch.nn.Module,
    dist_class: type,
    train_batch: TensorDict,
) -> torch.Tensor:
    """RLlib 1.13's loss function form: `R2D2TorchPolicy.loss`'s loss tensor on a batch
    of padded sequences; its stats go to `model.tower_stats` (`build_q_stats`)."""
    return class_loss(R2D2TorchPolicy, policy, model, dist_class, train_batch)


def build_r2d2_model_and_distribution(
    policy: R2D2TorchPolicy, obs_space: gym.Space, action_space: gym.Space, config: dict
) -> tuple[TorchModelV2, type]:
    """RLlib 1.13's `(recurrent Q-model, TorchCategorical)`: a new `R2D2TorchModel` as the
    policy builds it (from its own config). The policy's model and target copy exist
    already (built in `__init__`); this leaves them as they are."""
    return q_model_and_distribution(policy, action_space)


__all__ = [
    "ComputeTDErrorMixin",
    "F",
    "R2D2TorchModel",
    "R2D2TorchPolicy",
    "before_loss_init",
    "build_q_stats",
    "build_r2d2_model_and_distribution",
    "extra_action_out_fn",
    "grad_process_and_td_error_fn",
    "h_function",
    "h_inverse",
    "r2d2_loss",
    "setup_early_mixins",
]
