"""`ParameterNoise`: exploration by Gaussian noise on the policy model's weights.

Plappert et al. 2018, "Parameter Space Noise for Exploration" (arXiv:1706.01905):
instead of noise on the actions, the weights of the network that picks them are
perturbed, `theta~ = theta + N(0, sigma^2)`, with one noise draw per episode, so
the agent explores consistently within an episode. The scale `sigma` adapts
(sec. 3.3): after each sampled trajectory the distance between the perturbed
and the unperturbed policy's action distributions is measured on its
observations, and `sigma` grows by 1% when that distance is at most the target
`delta`, else shrinks by 1%:

- Discrete actions (DQN): the distance is the mean KL divergence
  KL(softmax(Q) || softmax(Q~)); the target is the KL between a greedy policy and
  an epsilon-greedy one, `delta = -log(1 - eps + eps / |A|)` (sec. C.1), with the
  epsilon of the sub-exploration below;
- Box actions (deterministic policies): the distance is the root mean squared
  action difference; the target is the Ornstein-Uhlenbeck sub-exploration's
  `ou_sigma * scale`.

Actions themselves come from a sub-exploration on the perturbed model's output:
by default `EpsilonGreedy` at epsilon 1 for `random_timesteps` steps, then 0.01
(Discrete), or `OrnsteinUhlenbeckNoise` with `random_timesteps` (Box).

corral perturbs the weights only for the forward pass that computes exploring
actions: the noise is added in `before_compute_actions(explore=True)` and taken
out again in `get_exploration_action`, right after that forward pass. So every
other reader of the model (learning, `explore=False` actions, `get_weights()`,
weight syncs, checkpoints) sees the unperturbed weights, whatever the batch mode.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch

from corral.policy.sample_batch import SampleBatch
from corral.utils.config_spec import Dict, Float, Int, Optional, Spec
from corral.utils.exploration.exploration import Exploration
from corral.utils.numpy import SMALL_NUMBER
from corral.utils.schedules import PiecewiseSchedule
from corral.utils.spaces import is_int_box

# How much the noise scale moves per adaptation (the paper's alpha = 1.01).
_ADAPT_FACTOR = 1.01


class ParameterNoise(Exploration):
    """Gaussian noise on the model's weights, re-sampled at each episode start.

    Args:
        action_space: the policy's action space (Discrete or Box unless a
            `sub_exploration` is given).
        initial_stddev: the noise scale `sigma` before any adaptation.
        random_timesteps: timesteps of uniform random actions at the start (the
            default sub-exploration's warm-up).
        sub_exploration: the `exploration_config` of the exploration that picks the
            actions from the perturbed model's output (None: see the module doc).
        **kwargs: `framework`, `policy_config`, `model`, `num_workers`,
            `worker_index` (see `Exploration`).

    Raises:
        ValueError: no model is given, it has no weights to perturb, the policy
            also uses noisy layers (`noisy: True`), or the action space has no
            default sub-exploration.
    """

    CONFIG_SPECS: ClassVar[dict[str, Spec]] = {
        "initial_stddev": Float(0),
        "random_timesteps": Int(0, integral_float_ok=True),
        "sub_exploration": Optional(Dict(what='a dict {"type": ..., **arguments}')),
    }

    def __init__(
        self,
        action_space: gym.Space,
        *,
        initial_stddev: float = 1.0,
        random_timesteps: int = 10000,
        sub_exploration: dict | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(action_space, **kwargs)
        if self.model is None:
            raise ValueError(
                "ParameterNoise perturbs the policy model's weights, but no model was given "
                "(model=None); it needs a policy with a torch model (e.g. DQN's)."
            )
        if self.policy_config.get("noisy"):
            raise ValueError(
                "exploration_config type 'ParameterNoise' and noisy layers (noisy=True) "
                "cannot be used together: set noisy=False or pick another exploration."
            )
        if float(initial_stddev) <= 0:
            raise ValueError(f"ParameterNoise initial_stddev={initial_stddev!r}: expected > 0.")
        self.stddev = float(initial_stddev)
        self.random_timesteps = int(random_timesteps)
        self.model_variables = perturbable_parameters(self.model)
        if not self.model_variables:
            raise ValueError(
                f"ParameterNoise: the model {type(self.model).__name__} has no trainable "
                "weights to perturb."
            )
        # One noise tensor per weight; zeros until the first episode starts.
        self.noise = [torch.zeros_like(p) for p in self.model_variables]
        self.weights_are_currently_noisy = False
        self._clean: list[torch.Tensor] | None = None
        self.sub_exploration = self._make_sub_exploration(sub_exploration)

    def _make_sub_exploration(self, sub_exploration: dict | None) -> Exploration:
        from corral.utils.exploration import make_exploration

        if sub_exploration is None:
            if isinstance(self.action_space, gym.spaces.Discrete):
                # A step function: uniform random actions for `random_timesteps`, then
                # nearly greedy on the perturbed Q-values (the paper's sec. C.1).
                warmup = self.random_timesteps
                schedule = PiecewiseSchedule(
                    [(0, 1.0), (warmup + 1, 1.0), (warmup + 2, 0.01)], outside_value=0.01
                )
                sub_exploration = {"type": "EpsilonGreedy", "epsilon_schedule": schedule}
            elif isinstance(self.action_space, gym.spaces.Box) and not is_int_box(
                self.action_space
            ):
                sub_exploration = {
                    "type": "OrnsteinUhlenbeckNoise",
                    "random_timesteps": self.random_timesteps,
                }
            else:
                raise ValueError(
                    f"ParameterNoise has no default sub_exploration for action space "
                    f"{self.action_space}; pass sub_exploration={{'type': ...}}."
                )
        return make_exploration(
            sub_exploration,
            self.action_space,
            self.policy_config,
            self.model,
            num_workers=self.num_workers,
            worker_index=self.worker_index,
        )

    # -- the noise ------------------------------------------------------------

    def sample_new_noise(self) -> None:
        """Draws a fresh N(0, stddev^2) noise for every weight (not applied yet)."""
        if self.weights_are_currently_noisy:
            self._remove_noise()
        with torch.no_grad():
            self.noise = [torch.randn_like(p) * self.stddev for p in self.model_variables]

    def _add_noise(self) -> None:
        weights = [p.data for p in self.model_variables]
        with torch.no_grad():
            # A copy of the clean weights, restored bit for bit (subtracting the noise
            # again would drift by rounding, call after call).
            if self._clean is None:
                self._clean = [w.clone() for w in weights]
            else:
                torch._foreach_copy_(self._clean, weights)
            torch._foreach_add_(weights, self.noise)
        self.weights_are_currently_noisy = True

    def _remove_noise(self) -> None:
        assert self._clean is not None
        with torch.no_grad():
            torch._foreach_copy_([p.data for p in self.model_variables], self._clean)
        self.weights_are_currently_noisy = False

    # -- the Exploration hooks ------------------------------------------------

    def before_compute_actions(
        self, *, timestep: int | None = None, explore: bool | None = None, **kwargs: Any
    ) -> None:
        """Adds the episode's noise to the weights for an exploring forward pass."""
        if explore is None:
            explore = bool(self.policy_config.get("explore", True))
        if self.weights_are_currently_noisy:  # a forward pass that raised left it in
            self._remove_noise()
        if explore:
            self._add_noise()

    def get_exploration_action(
        self, action_distribution: Any, timestep: int | None = None, explore: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Restores the unperturbed weights (the forward pass is done), then lets the
        sub-exploration pick actions from the (perturbed) model output."""
        if self.weights_are_currently_noisy:
            self._remove_noise()
        self._timestep(timestep)
        return self.sub_exploration.get_exploration_action(action_distribution, timestep, explore)

    def on_episode_start(self, policy: Any = None, **kwargs: Any) -> None:
        """A new episode: new noise for the policy (RLlib: one draw per episode)."""
        self.sample_new_noise()
        self.sub_exploration.on_episode_start(policy=policy, **kwargs)

    def on_episode_end(self, policy: Any = None, **kwargs: Any) -> None:
        self.sub_exploration.on_episode_end(policy=policy, **kwargs)

    def postprocess_trajectory(self, policy: Any, sample_batch: Any, **kwargs: Any) -> Any:
        """Adapts `stddev` to the distance between the perturbed and the unperturbed
        policy on the trajectory's observations (see the module doc)."""
        if len(sample_batch[SampleBatch.OBS]) == 0:
            return sample_batch
        noisy = self._dist_inputs(policy, sample_batch, explore=True)
        clean = self._dist_inputs(policy, sample_batch, explore=False)
        distance, delta = self.action_distance(noisy, clean)
        if distance <= delta:
            self.stddev *= _ADAPT_FACTOR
        else:
            self.stddev /= _ADAPT_FACTOR
        return sample_batch

    def _dist_inputs(self, policy: Any, sample_batch: Any, explore: bool) -> np.ndarray:
        """The policy's action-distribution inputs on the batch's observations, with
        (explore=True) or without the noise."""
        _, _, fetches = policy.compute_actions_from_input_dict(sample_batch, explore=explore)
        if SampleBatch.ACTION_DIST_INPUTS not in (fetches or {}):
            raise ValueError(
                f"ParameterNoise measures how far the noise moves the policy's action "
                f"distribution, but {type(policy).__name__}.compute_actions_from_input_dict "
                f"returns no {SampleBatch.ACTION_DIST_INPUTS!r} (it fetched "
                f"{sorted(fetches or {})}); it is built for policies that act through "
                "TorchPolicy.compute_actions_from_obs, such as DQN's."
            )
        return np.asarray(fetches[SampleBatch.ACTION_DIST_INPUTS], np.float64)

    def action_distance(self, noisy: np.ndarray, clean: np.ndarray) -> tuple[float, float]:
        """(distance, target delta) between the noisy and the clean action-distribution
        inputs of a batch (Q-values for Discrete actions, actions for Box)."""
        if isinstance(self.action_space, gym.spaces.Discrete):
            p_clean, p_noisy = _softmax(clean), _softmax(noisy)
            with np.errstate(divide="ignore", invalid="ignore"):  # (finite where p_noisy is 0)
                terms = p_clean * np.log(p_clean / (p_noisy + SMALL_NUMBER))
            # Masked actions (Q = -inf) carry no mass in either policy.
            kl = np.sum(np.where(p_clean > 0, terms, 0.0), axis=1)
            distance = float(np.nanmean(kl))
            epsilon = float(self.sub_exploration.get_info().get("cur_epsilon", 0.01))
            n = int(self.action_space.n)
            delta = float(-np.log(1.0 - epsilon + epsilon / n))
        else:
            distance = float(np.sqrt(np.mean(np.square(clean - noisy))))
            scale = float(self.sub_exploration.get_info().get("cur_scale", 1.0))
            delta = float(getattr(self.sub_exploration, "ou_sigma", 0.2)) * scale
        return distance, delta

    # -- reporting and state --------------------------------------------------

    def get_info(self, sess: Any = None) -> dict[str, Any]:
        return {"cur_stddev": self.stddev, **self.sub_exploration.get_info()}

    def get_state(self, sess: Any = None) -> dict[str, Any]:
        return {
            **super().get_state(),
            "cur_stddev": self.stddev,
            "sub_exploration": self.sub_exploration.get_state(),
        }

    def set_state(self, state: dict[str, Any], sess: Any = None) -> None:
        """Takes over a saved scale (and sub-exploration); the episode's noise is
        re-drawn at that scale."""
        super().set_state(state)
        if "cur_stddev" in state:
            self.stddev = float(state["cur_stddev"])
            self.sample_new_noise()
        if "sub_exploration" in state:
            self.sub_exploration.set_state(state["sub_exploration"])


def perturbable_parameters(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The trainable weights ParameterNoise perturbs: all but layer norms' (RLlib
    leaves "LayerNorm" variables alone: normalisation is not a policy feature)."""
    skip = {
        id(p)
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.LayerNorm) or "LayerNorm" in name
        for p in module.parameters(recurse=False)
    }
    return [
        p
        for name, p in model.named_parameters()
        if p.requires_grad and id(p) not in skip and "LayerNorm" not in name
    ]


def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - np.max(x, axis=1, keepdims=True))
    return z / np.sum(z, axis=1, keepdims=True)


__all__ = ["ParameterNoise", "perturbable_parameters"]
