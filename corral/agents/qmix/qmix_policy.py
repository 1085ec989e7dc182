"""QMIX's policy: one group of agents, a shared recurrent Q-network, a mixer and its loss.

Rashid et al. 2018, "QMIX: Monotonic Value Function Factorisation for Deep Multi-Agent
Reinforcement Learning" (arXiv:1803.11485). The policy acts for a group of agents made by
`MultiAgentEnv.with_agent_groups`: its observation is the `Tuple` of the agents'
observations, its action the `Tuple` of their `Discrete` actions. Each agent a picks
epsilon-greedily from its own Q_a(tau_a, .) (the shared `RNNModel`, one hidden state per
agent) among the actions its mask allows. Training minimises, over replayed episodes,

    L = mean_{b,t} (Q_tot(s_t, u_t) - y_t)^2,
    y_t = r_t + gamma (1 - terminated_t) Q_tot^-(s_{t+1}, u*_{t+1}),

with Q_tot the mixer of the agents' chosen Q-values (`QMixer`: monotonic, from
hypernetworks on the global state s; `VDNMixer`: their sum), Q_tot^- the target networks
(agent network and mixer), u*_{t+1} each agent's best allowed action, taken from the
online network with `double_q` (van Hasselt et al. 2016) and from the target network
otherwise, and r_t the group's reward. With `mixer: None` each agent's Q_a is trained on
its own target r_t + gamma (1 - terminated_t) Q_a^-(tau_{t+1}, u*): independent
Q-learners sharing the team reward.

Observations: an agent's observation is either plain, or a dict `{"obs": ..., "state":
..., "action_mask": ...}` (`state` and `action_mask` optional). `action_mask` (`Box(0, 1,
(n_actions,))`) lists the allowed actions; `state` is the global state the mixer reads
(taken from the first agent); without it the mixer reads all agents' observations.

Differences from RLlib 1.13 (behaviour kept otherwise):

- Rewards: RLlib trains on the members' own rewards (`_group_rewards` in the infos)
  broadcast against Q_tot, which fits Q_tot to their mean; corral trains on the group's
  reward, their sum (the paper's team reward), which the sampler records anyway.
- RLlib unrolls the agent network over the next observations from a zero state, apart
  from the unroll over the observations; corral unrolls once over the episode's
  observations and the last next observation (as the authors' PyMARL), so that Q(s_{t+1})
  continues the hidden state of step t.
- Episodes whose last step was only truncated bootstrap from it (RLlib treats any `done`
  as terminal).
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.agents.qmix.mixers import QMixer, VDNMixer
from corral.agents.qmix.model import RNNModel, _get_size
from corral.env.gym_compat import convert_space
from corral.env.multi_agent_env import ENV_STATE
from corral.models import ModelCatalog
from corral.models.preprocessors import restore_original_dimensions
from corral.models.torch.torch_modelv2 import TorchModelV2
from corral.policy.rnn_sequencing import sequence_starts, trajectory_boundaries
from corral.policy.sample_batch import SampleBatch
from corral.policy.torch_mixins import TargetNetworkStateMixin, update_target_network
from corral.policy.torch_policy import TensorDict, TorchPolicy
from corral.utils.error import UnsupportedSpaceException
from corral.utils.exploration import EpsilonGreedy, Exploration, make_exploration

# The key of the allowed actions in an agent's observation dict.
ACTION_MASK = "action_mask"


def _unroll_mac(model: Any, obs: torch.Tensor) -> torch.Tensor:
    """The agents' Q-values along sequences: `obs [B, T, n_agents, obs_size]` ->
    `[B, T, n_agents, n_actions]`, each sequence from the model's initial state."""
    batch, steps, n_agents = obs.shape[:3]
    initial = torch.as_tensor(np.asarray(model.get_initial_state()[0]), device=obs.device)
    h = initial.float().expand(batch, n_agents, -1).reshape(batch * n_agents, -1)
    q_steps = []
    for t in range(steps):
        q, (h,) = model({SampleBatch.OBS: obs[:, t].reshape(batch * n_agents, -1)}, [h], None)
        q_steps.append(q.reshape(batch, n_agents, -1))
    return torch.stack(q_steps, dim=1)


class QMixLoss(nn.Module):
    """QMIX's TD loss over padded sequences (see the module docstring).

    Args:
        model: the agents' shared Q-network (`RNNModel`).
        target_model: its target copy.
        mixer: `QMixer`, `VDNMixer` or None (independent Q-learners).
        target_mixer: the mixer's target copy (None with `mixer` None).
        n_agents: agents in the group.
        n_actions: actions of each agent.
        double_q: pick the next actions with the online network.
        gamma: the discount.
    """

    def __init__(
        self,
        model: nn.Module,
        target_model: nn.Module,
        mixer: nn.Module | None,
        target_mixer: nn.Module | None,
        n_agents: int,
        n_actions: int,
        double_q: bool = True,
        gamma: float = 0.99,
    ) -> None:
        super().__init__()
        self.model = model
        self.target_model = target_model
        self.mixer = mixer
        self.target_mixer = target_mixer
        self.n_agents = n_agents
        self.n_actions = n_actions
        self.double_q = double_q
        self.gamma = gamma

    def forward(
        self,
        rewards: torch.Tensor,
        actions: torch.Tensor,
        terminated: torch.Tensor,
        mask: torch.Tensor,
        obs: torch.Tensor,
        next_obs: torch.Tensor,
        action_mask: torch.Tensor,
        next_action_mask: torch.Tensor,
        state: torch.Tensor | None = None,
        next_state: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The loss of `B` sequences of `T` steps.

        Args:
            rewards: `[B, T]` the group's rewards.
            actions: `[B, T, n_agents]` the actions taken.
            terminated: `[B, T]` 1 where the episode terminated at that step.
            mask: `[B, T]` 1 on real steps, 0 on padding.
            obs: `[B, T, n_agents, obs_size]`.
            next_obs: `[B, T, n_agents, obs_size]`.
            action_mask: `[B, T, n_agents, n_actions]` 1 where an action is allowed.
            next_action_mask: the same at the next step.
            state: `[B, T, state_size]` the mixer's input (None: all agents' obs).
            next_state: the same at the next step.

        Returns:
            (loss, mask [B, T, k], masked TD error [B, T, k], Q_taken [B, T, k],
            targets [B, T, k]); k is 1 with a mixer, n_agents without.

        Raises:
            ValueError: only one of `state` / `next_state` given, or a state that does
                not end the episode allows no action.
        """
        if (state is None) != (next_state is None):
            raise ValueError(
                "QMixLoss needs both `state` and `next_state`, or neither (then the mixer "
                "reads all agents' observations)."
            )
        batch, steps = rewards.shape
        if state is None or next_state is None:
            state = obs.reshape(batch, steps, -1)
            next_state = next_obs.reshape(batch, steps, -1)
        # One unroll over o_0 .. o_T: step t's Q(s_t) and, one step on, Q(s_{t+1}).
        all_obs = torch.cat([obs[:, :1], next_obs], dim=1)
        mac_out = _unroll_mac(self.model, all_obs)
        q_taken = mac_out[:, :-1].gather(3, actions.long().unsqueeze(3)).squeeze(3)

        real = mask.bool()
        with torch.no_grad():
            unavailable = next_action_mask == 0
            target_q = _unroll_mac(self.target_model, all_obs)[:, 1:]
            target_q = target_q.masked_fill(unavailable, -np.inf)
            if self.double_q:
                online_next = mac_out[:, 1:].detach().masked_fill(unavailable, -np.inf)
                best = online_next.argmax(dim=3, keepdim=True)
                target_max = target_q.gather(3, best).squeeze(3)
            else:
                target_max = target_q.amax(dim=3)
            no_action = ~torch.isfinite(target_max)
            ends = terminated.bool() | ~real
            if bool((no_action & ~ends.unsqueeze(-1)).any()):
                raise ValueError(
                    "QMIX: an agent's action_mask allows no action in a state that does not "
                    "end the episode; every agent needs at least one allowed action."
                )
            target_max = target_max.masked_fill(no_action, 0.0)

        if self.mixer is not None and self.target_mixer is not None:
            q_taken = self.mixer(q_taken, state)
            with torch.no_grad():
                target_max = self.target_mixer(target_max, next_state)
        # 1-step Q-learning targets; per agent (no mixer) or for the team (with one).
        keep = (1.0 - terminated.float()).unsqueeze(-1)
        targets = rewards.float().unsqueeze(-1) + self.gamma * keep * target_max
        td_error = q_taken - targets.detach()
        mask_k = real.float().unsqueeze(-1).expand_as(td_error)
        masked_td_error = td_error * mask_k
        loss = (masked_td_error**2).sum() / mask_k.sum().clamp(min=1.0)
        return loss, mask_k, masked_td_error, q_taken, targets


class QMixTorchPolicy(TargetNetworkStateMixin, TorchPolicy):
    """QMIX for one group of homogeneous agents (`Tuple` observations and actions).

    Use `MultiAgentEnv.with_agent_groups()` to group the agents: each group acts as one
    agent with `Tuple` spaces. The agents share `RNNModel` (or the `custom_model`);
    the mixer is `config["mixer"]`: "qmix", "vdn" or None.

    The learner hands the loss whole batches of replayed episodes, which the loss cuts
    into sequences of at most `model.max_seq_len` steps, padded to the longest one (RLlib
    1.13's `chop_into_sequences(dynamic_max=True)`); so, as RLlib's, the policy is not
    `is_recurrent()` to the learner although it carries each agent's hidden state while
    acting.
    """

    # The group's Tuple of actions stays one flat row per step (the mixer's layout).
    nested_actions_built = False

    train_columns: tuple[str, ...] = (
        SampleBatch.OBS,
        SampleBatch.NEXT_OBS,
        SampleBatch.ACTIONS,
        SampleBatch.REWARDS,
        SampleBatch.TERMINATEDS,
        SampleBatch.EPS_ID,
        SampleBatch.AGENT_INDEX,
        SampleBatch.T,
    )

    @staticmethod
    def get_default_config() -> dict:
        """QMIX's `DEFAULT_CONFIG` (the keys this policy reads)."""
        from corral.agents.qmix.qmix import DEFAULT_CONFIG

        return DEFAULT_CONFIG

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        agent_space, self.n_agents, self.n_actions = _validate(obs_space, action_space)
        self.has_action_mask = False
        self.has_env_global_state = False
        self._dict_obs = isinstance(agent_space, gym.spaces.Dict)
        if self._dict_obs:
            assert isinstance(agent_space, gym.spaces.Dict)
            keys = set(agent_space.spaces)
            if "obs" not in keys:
                raise ValueError(
                    f"QMIX: a Dict observation of an agent needs an 'obs' entry, got the keys "
                    f"{sorted(keys)}."
                )
            if ACTION_MASK in keys:
                shape = tuple(agent_space.spaces[ACTION_MASK].shape or ())
                if shape != (self.n_actions,):
                    raise ValueError(
                        f"QMIX: the action_mask's shape must be ({self.n_actions},) (one entry "
                        f"per action), got {shape}."
                    )
                self.has_action_mask = True
            self.has_env_global_state = ENV_STATE in keys
            self.env_global_state_size = (
                _get_size(agent_space.spaces[ENV_STATE]) if self.has_env_global_state else 0
            )
            agent_space = agent_space.spaces["obs"]
        self.agent_obs_space = agent_space
        self.obs_size = _get_size(agent_space)
        if not self.has_env_global_state:
            self.env_global_state_size = self.obs_size * self.n_agents
        mixer_name = config.get("mixer", "qmix")
        if mixer_name not in ("qmix", "vdn", None):
            raise ValueError(f"Unknown mixer type {mixer_name!r}: use 'qmix', 'vdn' or None.")
        # The learner clips at `grad_clip`: RLlib's QMIX calls it `grad_norm_clipping`.
        config = {
            **config,
            "model": {**config["model"], "n_agents": self.n_agents},
            "grad_clip": config.get("grad_norm_clipping", config.get("grad_clip")),
        }
        # RLlib 1.13's `cur_epsilon` (see `set_epsilon`).
        self.cur_epsilon = 1.0
        TorchPolicy.__init__(self, obs_space, action_space, config)
        self.mixer: nn.Module | None = None
        if mixer_name == "qmix":
            self.mixer = QMixer(
                self.n_agents, self.env_global_state_size, int(config.get("mixing_embed_dim", 32))
            )
        elif mixer_name == "vdn":
            self.mixer = VDNMixer()
        online: dict[str, nn.Module] = {"model": self.model}
        if self.mixer is not None:
            online["mixer"] = self.mixer
        # The trained modules, and their frozen target copies.
        self._online = nn.ModuleDict(online)
        self._target = copy.deepcopy(self._online).requires_grad_(False)
        self.target_model: nn.Module = self._target["model"]
        self.target_mixer: nn.Module | None = self._target["mixer"] if self.mixer else None
        self.gamma = float(config["gamma"])
        self.qmix_loss = QMixLoss(
            self.model,
            self.target_model,
            self.mixer,
            self.target_mixer,
            self.n_agents,
            self.n_actions,
            bool(config.get("double_q", True)),
            self.gamma,
        )

    # -- construction -----------------------------------------------------------

    def make_model(self, num_outputs: int) -> TorchModelV2:
        """The agents' shared Q-network: `RNNModel`, or the config's `custom_model`."""
        agent_action_space = self.action_space.spaces[0]  # type: ignore[attr-defined]
        return ModelCatalog.get_model_v2(
            self.agent_obs_space,
            agent_action_space,
            self.n_actions,
            self.config["model"],
            framework="torch",
            name="model",
            default_model=RNNModel,
        )

    def make_exploration(self) -> Exploration:
        """Epsilon-greedy (`exploration_config`) over one agent's `Discrete` actions."""
        agent_action_space = self.action_space.spaces[0]  # type: ignore[attr-defined]
        exploration = make_exploration(
            self.config.get("exploration_config"),
            agent_action_space,
            self.config,
            self.model,
            num_workers=int(self.config.get("num_workers", 0) or 0),
            worker_index=int(self.config.get("worker_index", 0) or 0),
        )
        if not isinstance(exploration, EpsilonGreedy):
            raise ValueError(
                "QMIX explores epsilon-greedily: exploration_config.type must be "
                f"'EpsilonGreedy', got {type(exploration).__name__}."
            )
        self._inline_sampling = False
        self._before_compute = None
        return exploration

    def make_optimizer(self) -> torch.optim.Optimizer:
        """RMSprop over the agent network and the mixer (RLlib's `optim_alpha`, `optim_eps`)."""
        return torch.optim.RMSprop(
            self._online.parameters(),
            lr=float(self.config["lr"]),
            alpha=float(self.config.get("optim_alpha", 0.99)),
            eps=float(self.config.get("optim_eps", 1e-5)),
        )

    def is_recurrent(self) -> bool:
        """False: the loss cuts its sequences itself (see the class docstring)."""
        return False

    # -- observations -------------------------------------------------------------

    def _unpack(self, flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Preprocessed group observations `[N, D]` -> (the agents' observations
        `[N, n_agents, obs_size]`, their action masks `[N, n_agents, n_actions]`, the
        global state `[N, state_size]` or None)."""
        rows = flat.shape[0]
        if not self._dict_obs:
            obs = flat.reshape(rows, self.n_agents, self.obs_size)
            return obs, torch.ones(rows, self.n_agents, self.n_actions, device=flat.device), None
        agents = restore_original_dimensions(flat, self.preprocessor.observation_space)
        obs = torch.stack([a["obs"].reshape(rows, -1) for a in agents], dim=1)
        if self.has_action_mask:
            mask = torch.stack([a[ACTION_MASK].reshape(rows, -1) for a in agents], dim=1)
        else:
            mask = torch.ones(rows, self.n_agents, self.n_actions, device=flat.device)
        state = agents[0][ENV_STATE].reshape(rows, -1) if self.has_env_global_state else None
        return obs, mask, state

    # -- acting ---------------------------------------------------------------------

    def compute_actions_from_obs(
        self,
        obs: np.ndarray,
        explore: bool | None = None,
        state: list[np.ndarray] | None = None,
        prev_actions: np.ndarray | None = None,
        prev_rewards: np.ndarray | None = None,
        view_inputs: dict[str, np.ndarray] | None = None,
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Each agent's epsilon-greedy allowed action: `[N, n_agents]` (flat action rows)
        and `state_out_0` (the agents' hidden states `[N, n_agents, H]`)."""
        if explore is None:
            explore = self.config.get("explore", True)
        rows = len(obs)
        with torch.inference_mode():
            agent_obs, mask, _ = self._unpack(torch.as_tensor(np.asarray(obs, np.float32)))
            if state:
                h = torch.as_tensor(np.asarray(state[0], np.float32))
            else:
                h = torch.as_tensor(self._initial_state[0]).expand(rows, -1, -1)
            with self._lock:
                q, (h_out,) = self.model(
                    {SampleBatch.OBS: agent_obs.reshape(rows * self.n_agents, -1)},
                    [h.reshape(rows * self.n_agents, -1)],
                    None,
                )
            q = q.reshape(rows, self.n_agents, self.n_actions)
            actions = self._select_actions(q, mask, bool(explore))
        return actions.numpy().astype(np.float32), {
            "state_out_0": h_out.reshape(rows, self.n_agents, -1).numpy(),
            SampleBatch.ACTION_DIST_INPUTS: q.reshape(rows, -1).numpy(),
        }

    def _select_actions(self, q: torch.Tensor, mask: torch.Tensor, explore: bool) -> torch.Tensor:
        """The best allowed action of each agent; with `explore`, with probability
        epsilon a uniformly drawn allowed one instead (each agent on its own)."""
        allowed = mask > 0
        if not bool(allowed.any(dim=-1).all()):
            raise ValueError("QMIX: an agent's action_mask allows no action.")
        greedy = q.masked_fill(~allowed, -np.inf).argmax(dim=-1)
        if not explore:
            return greedy
        epsilon = self.exploration.epsilon(self.global_timestep)  # type: ignore[attr-defined]
        random = torch.multinomial(allowed.reshape(-1, self.n_actions).float(), 1)
        pick_random = torch.rand(greedy.shape) < epsilon
        return torch.where(pick_random, random.reshape(greedy.shape), greedy)

    # -- learning ---------------------------------------------------------------------

    def loss(
        self, model: torch.nn.Module, dist_class: type, train_batch: TensorDict
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        source, real, num_seqs, length = self._sequence_layout(train_batch)

        def padded(x: torch.Tensor) -> torch.Tensor:
            return x.index_select(0, source).reshape(num_seqs, length, *x.shape[1:])

        obs, action_mask, state = self._unpack(train_batch[SampleBatch.OBS])
        next_obs, next_action_mask, next_state = self._unpack(train_batch[SampleBatch.NEXT_OBS])
        loss, mask, masked_td_error, q_taken, targets = self.qmix_loss(
            padded(train_batch[SampleBatch.REWARDS]),
            padded(train_batch[SampleBatch.ACTIONS]),
            padded(train_batch[SampleBatch.TERMINATEDS]),
            real,
            padded(obs),
            padded(next_obs),
            padded(action_mask),
            padded(next_action_mask),
            None if state is None else padded(state),
            None if next_state is None else padded(next_state),
        )
        with torch.no_grad():
            elements = mask.sum().clamp(min=1.0)
            stats = {
                "loss": loss,
                "td_error_abs": masked_td_error.abs().sum() / elements,
                "q_taken_mean": (q_taken * mask).sum() / elements,
                "target_mean": (targets * mask).sum() / elements,
            }
        return loss, stats

    def _sequence_layout(self, batch: TensorDict) -> tuple[torch.Tensor, torch.Tensor, int, int]:
        """Where the rows go in `[B, T]` padded sequences: (source row of each slot
        `[B * T]`, real-step mask `[B, T]`, B, T). A sequence is a run of one episode and
        agent with consecutive `t` (the same episode replayed twice in one batch makes
        two), cut every `model.max_seq_len` steps; T is the longest sequence."""
        eps = batch[SampleBatch.EPS_ID].cpu().numpy()
        n = len(eps)
        ids = [eps]
        if SampleBatch.AGENT_INDEX in batch:
            ids.append(batch[SampleBatch.AGENT_INDEX].cpu().numpy())
        boundaries = trajectory_boundaries(n, ids)
        if SampleBatch.T in batch:
            t = batch[SampleBatch.T].cpu().numpy()
            boundaries[1:] |= t[1:] != t[:-1] + 1
        starts = sequence_starts(boundaries, int(self.config["model"]["max_seq_len"]))
        lengths = np.diff(np.append(starts, n))
        length = int(lengths.max()) if len(lengths) else 0
        slot = np.arange(len(starts) * length)
        seq, offset = slot // max(length, 1), slot % max(length, 1)
        valid = offset < lengths[seq]
        source = np.where(valid, starts[seq] + offset, 0)
        device = batch[SampleBatch.OBS].device
        return (
            torch.as_tensor(source, device=device),
            torch.as_tensor(valid.reshape(len(starts), length), device=device),
            len(starts),
            length,
        )

    # -- weights and targets -------------------------------------------------------------

    def set_epsilon(self, epsilon: float) -> None:
        """Sets `cur_epsilon`, RLlib 1.13's record of an epsilon, kept in the policy's
        state. As in 1.13, acting does not read it: the epsilon of each step comes from
        the `exploration_config`'s schedule (`policy.exploration.epsilon()`)."""
        self.cur_epsilon = float(epsilon)

    def extra_state(self) -> dict[str, Any]:
        return {**super().extra_state(), "cur_epsilon": self.cur_epsilon}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        super().set_extra_state(state)
        if "cur_epsilon" in state:
            self.set_epsilon(state["cur_epsilon"])

    def get_weights(self) -> dict[str, np.ndarray]:
        """The agent network's weights and the mixer's (prefixed `mixer.`)."""
        return {k: v.detach().cpu().numpy().copy() for k, v in self._online_state().items()}

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        state = {k: torch.as_tensor(np.array(v, copy=True)) for k, v in weights.items()}
        model_state = {k: v for k, v in state.items() if not k.startswith("mixer.")}
        mixer_state = {k[6:]: v for k, v in state.items() if k.startswith("mixer.")}
        with self._lock:
            self.model.load_state_dict(model_state)
            if self.mixer is not None:
                self.mixer.load_state_dict(mixer_state)

    def _online_state(self) -> dict[str, torch.Tensor]:
        state = dict(self.model.state_dict())
        if self.mixer is not None:
            state.update({f"mixer.{k}": v for k, v in self.mixer.state_dict().items()})
        return state

    def target_network(self) -> torch.nn.Module:
        """The target agent network and mixer (a `ModuleDict`)."""
        return self._target

    def update_target(self, tau: float | None = None) -> None:
        """Targets <- tau * online + (1 - tau) * targets (None or 1: a copy)."""
        update_target_network(self._online, self._target, 1.0 if tau is None else float(tau))

    def export_model(self, export_dir: str, onnx: int | None = None) -> None:
        raise NotImplementedError(
            "QMIX's policy does not export its model (a recurrent agent network and a "
            "mixer); save a checkpoint instead."
        )


def _validate(obs_space: gym.Space, action_space: gym.Space) -> tuple[gym.Space, int, int]:
    """(one agent's observation space, n_agents, n_actions) of a group's `Tuple` spaces.

    Raises:
        UnsupportedSpaceException: spaces that are not `Tuple`s of one per agent, actions
            that are not `Discrete` with the same number of actions, or agents observing
            differently.
    """
    obs_space = convert_space(getattr(obs_space, "original_space", None) or obs_space)
    action_space = convert_space(action_space)
    if not isinstance(obs_space, gym.spaces.Tuple):
        raise UnsupportedSpaceException(
            f"QMIX needs a Tuple observation space (one entry per agent of a group made with "
            f"MultiAgentEnv.with_agent_groups), got {obs_space}."
        )
    if not isinstance(action_space, gym.spaces.Tuple):
        raise UnsupportedSpaceException(
            f"QMIX needs a Tuple action space (one Discrete space per agent of a group made "
            f"with MultiAgentEnv.with_agent_groups), got {action_space}."
        )
    if len(obs_space.spaces) != len(action_space.spaces):
        raise UnsupportedSpaceException(
            f"QMIX: the observation space has {len(obs_space.spaces)} agents, the action "
            f"space {len(action_space.spaces)}: {obs_space} vs {action_space}."
        )
    first = action_space.spaces[0]
    if not all(isinstance(s, gym.spaces.Discrete) for s in action_space.spaces) or any(
        s != first for s in action_space.spaces
    ):
        raise UnsupportedSpaceException(
            f"QMIX needs each agent's actions to be the same Discrete space, got {action_space}."
        )
    if any(s != obs_space.spaces[0] for s in obs_space.spaces):
        raise UnsupportedSpaceException(
            f"QMIX needs agents that observe the same space (homogeneous agents), got {obs_space}."
        )
    return obs_space.spaces[0], len(obs_space.spaces), int(first.n)  # type: ignore[attr-defined]


__all__ = ["ACTION_MASK", "QMixLoss", "QMixTorchPolicy"]
