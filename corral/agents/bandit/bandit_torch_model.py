"""The linear models of the contextual bandits: one online ridge regression per arm.

`OnlineLinearRegression` is Bayesian linear regression of the reward on a feature vector
`x`, updated in closed form (Li et al. 2010, LinUCB, Algorithm 1; Agrawal & Goyal 2013,
linear Thompson sampling):

    A = lambda_ I + sum x x^T        (precision, "A")
    b = sum r x                      (RLlib's `f`)
    theta = A^-1 b                   (ridge-regression estimate)
    covariance = alpha A^-1          (posterior covariance, scaled by `alpha`)

The UCB score of an arm adds `sqrt(x^T covariance x)` (= sqrt(alpha) times LinUCB's
`sqrt(x^T A^-1 x)`, as RLlib 1.13) to `x^T theta`; Thompson sampling scores with a
`theta` drawn from N(theta, covariance).

Two model families, as RLlib 1.13's:

- `DiscreteLinearModel`: a fixed set of arms (a `Discrete` action space), one regression
  per arm on the same context (the flattened observation).
- `ParametricLinearModel`: arms described by their own features (a `Dict` observation
  with an "item" entry of shape `[num_items, feature_dim]`, the action picks an item),
  one regression shared by all items.

The `...UCB` and `...ThompsonSampling` subclasses score with the exploration they are
named after; the policy picks the model from `exploration_config["type"]`. The
regressions' statistics are parameters without gradients (as RLlib 1.13's): they travel
with the weights and are saved with them (safetensors).
"""

from __future__ import annotations

from typing import Any, ClassVar, cast

import gymnasium as gym
import torch
from torch import nn

from corral.models.preprocessors import restore_original_dimensions
from corral.models.torch.torch_modelv2 import TorchModelV2

TensorType = torch.Tensor

__all__ = [
    "DiscreteLinearModel",
    "DiscreteLinearModelThompsonSampling",
    "DiscreteLinearModelUCB",
    "OnlineLinearRegression",
    "ParametricLinearModel",
    "ParametricLinearModelThompsonSampling",
    "ParametricLinearModelUCB",
]

# RLlib 1.13's weight of the parametric model's confidence bonus.
PARAMETRIC_UCB_WEIGHT = 0.3


class OnlineLinearRegression(nn.Module):
    """Ridge regression of a reward on `feature_dim` features, updated in closed form.

    Args:
        feature_dim: the number of features `d`.
        alpha: scale of the posterior covariance (the exploration strength).
        lambda_: the ridge prior: `A` starts as `lambda_ * I`.

    Attributes:
        precision: `A`, [d, d].
        f: `b`, the reward-weighted sum of the features, [d].
        covariance: `alpha * A^-1`, [d, d].
        theta: the estimate `A^-1 b`, [d].
    """

    precision: TensorType
    f: TensorType
    covariance: TensorType
    theta: TensorType

    def __init__(self, feature_dim: int, alpha: float = 1.0, lambda_: float = 1.0) -> None:
        super().__init__()
        if feature_dim < 1:
            raise ValueError(f"feature_dim must be >= 1, got {feature_dim}.")
        if lambda_ <= 0:
            raise ValueError(f"lambda_ must be > 0 (A must be invertible), got {lambda_}.")
        self.d = int(feature_dim)
        self.alpha = float(alpha)
        eye = torch.eye(self.d)
        # Parameters without gradients (RLlib 1.13's): the learner's finite-weights
        # guard covers them, and they travel and are saved with the weights.
        self.precision = _statistic(lambda_ * eye)
        self.f = _statistic(torch.zeros(self.d))
        self.covariance = _statistic((self.alpha / lambda_) * eye)
        self.theta = _statistic(torch.zeros(self.d))

    @torch.no_grad()
    def partial_fit(self, x: TensorType, y: TensorType) -> None:
        """Adds observations: `A += X^T X`, `b += X^T y`, then `theta`, `covariance` anew.

        One batched update equals the row-by-row updates (the sums are the same).

        Args:
            x: features, [n, d] (or one row, [d]).
            y: rewards, [n].
        """
        x = self._check_inputs(x).reshape(-1, self.d).to(self.precision)
        y = torch.as_tensor(y).reshape(-1).to(self.precision)
        if len(x) != len(y):
            raise ValueError(f"partial_fit: {len(x)} feature rows but {len(y)} rewards.")
        self.precision += x.T @ x
        self.f += x.T @ y
        # A is symmetric positive definite: its inverse through the Cholesky factor
        # (stable, and symmetric as the sampler's Cholesky needs).
        inverse = torch.cholesky_inverse(torch.linalg.cholesky(self.precision))
        self.theta.copy_(inverse @ self.f)
        self.covariance.copy_(self.alpha * inverse)

    def sample_theta(self, n: int | None = None) -> TensorType:
        """Draws of `theta` from N(theta, covariance): [d], or [n, d] with `n`."""
        scale = torch.linalg.cholesky(self.covariance)
        noise = torch.randn((1 if n is None else n, self.d), dtype=self.theta.dtype)
        draws = self.theta + noise.to(self.theta.device) @ scale.T
        return draws[0] if n is None else draws

    def get_ucbs(self, x: TensorType) -> TensorType:
        """The confidence widths `sqrt(x^T covariance x)` of LinUCB (Algorithm 1).

        Args:
            x: features, [B, d] or [B, num_items, d].

        Returns:
            [B] or [B, num_items].
        """
        x = self._check_inputs(x)
        return ((x @ self.covariance) * x).sum(dim=-1).clamp(min=0.0).sqrt()

    def forward(self, x: TensorType, sample_theta: bool = False) -> TensorType:
        """Predicted rewards `x^T theta`: [B] for x [B, d], [B, num_items] for [B, C, d].

        Args:
            x: features.
            sample_theta: score with `theta` drawn from its posterior (Thompson
                sampling), one draw per batch row.
        """
        x = self._check_inputs(x)
        if not sample_theta:
            return x @ self.theta
        thetas = self.sample_theta(x.shape[0])  # [B, d]
        if x.dim() == 3:
            return torch.einsum("bcd,bd->bc", x, thetas)
        return (x * thetas).sum(dim=-1)

    def _check_inputs(self, x: TensorType) -> TensorType:
        if x.dim() not in (1, 2, 3):
            raise ValueError(
                f"Features must be [d], [B, d] or [B, num_items, d]; got shape {tuple(x.shape)}."
            )
        if x.shape[-1] != self.d:
            raise ValueError(
                f"The regression has {self.d} features but the input has {x.shape[-1]} "
                f"(shape {tuple(x.shape)})."
            )
        return x.to(self.theta.dtype)


def _statistic(value: TensorType) -> nn.Parameter:
    """A parameter that is updated in closed form, never by gradients."""
    return nn.Parameter(value, requires_grad=False)


class _LinearBanditModel(TorchModelV2):
    """What both model families share: cached scores and context, RLlib's accessors."""

    # How `forward` scores: `predict`'s keyword arguments (the UCB and TS subclasses').
    _exploration: ClassVar[dict[str, bool]] = {}

    def __init__(
        self,
        obs_space: gym.Space,
        action_space: gym.Space,
        num_outputs: int,
        model_config: dict,
        name: str,
    ) -> None:
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        self._cur_value: TensorType | None = None
        self._cur_ctx: TensorType | None = None

    def predict(
        self, x: TensorType, sample_theta: bool = False, use_ucb: bool = False
    ) -> TensorType:
        """Scores of every arm for contexts `x` (the model's input), cached with `x`."""
        raise NotImplementedError

    def value_function(self) -> TensorType:
        """The scores of the last `forward`/`predict` (RLlib 1.13's bandits), [B, arms]."""
        if self._cur_value is None:
            raise RuntimeError("Call forward() (or predict()) before value_function().")
        return self._cur_value

    def current_obs(self) -> TensorType:
        """The contexts of the last `forward`/`predict`."""
        if self._cur_ctx is None:
            raise RuntimeError("Call forward() (or predict()) before current_obs().")
        return self._cur_ctx

    def _scores_for(self, input_dict: dict[str, Any]) -> TensorType:
        """The input the family scores (overridden by each family)."""
        raise NotImplementedError

    def forward(
        self, input_dict: dict[str, Any], state: list[TensorType], seq_lens: Any
    ) -> tuple[TensorType, list[TensorType]]:
        """The greedy scores `x^T theta` per arm (the UCB and TS subclasses add their
        exploration)."""
        return self.predict(self._scores_for(input_dict), **self._exploration), state


class DiscreteLinearModel(_LinearBanditModel):
    """One `OnlineLinearRegression` per arm over the flattened observation.

    `model_config` may hold "alpha" (default 1) and "lambda_" (default 1).
    """

    def __init__(
        self,
        obs_space: gym.Space,
        action_space: gym.Space,
        num_outputs: int,
        model_config: dict,
        name: str,
    ) -> None:
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        alpha = model_config.get("alpha", 1.0)
        lambda_ = model_config.get("lambda_", 1.0)
        shape = obs_space.shape or ()
        self.feature_dim = int(torch.Size(shape).numel())
        self.arms = nn.ModuleList(
            OnlineLinearRegression(self.feature_dim, alpha=alpha, lambda_=lambda_)
            for _ in range(num_outputs)
        )

    def regressions(self) -> list[OnlineLinearRegression]:
        """The arms' regressions, in arm order."""
        return [cast(OnlineLinearRegression, arm) for arm in self.arms]

    def _scores_for(self, input_dict: dict[str, Any]) -> TensorType:
        return input_dict["obs_flat"]

    def predict(
        self, x: TensorType, sample_theta: bool = False, use_ucb: bool = False
    ) -> TensorType:
        """Scores [B, num_arms]: each arm's `x^T theta` (with `sample_theta`, a drawn
        theta), plus each arm's confidence width with `use_ucb`."""
        x = x.reshape(x.shape[0], -1)
        self._cur_ctx = x
        arms = self.regressions()
        scores = torch.stack([arm(x, sample_theta) for arm in arms], dim=-1)
        if use_ucb:
            scores = scores + torch.stack([arm.get_ucbs(x) for arm in arms], dim=-1)
        self._cur_value = scores
        return scores

    def partial_fit(self, x: TensorType, y: TensorType, arms: TensorType) -> None:
        """Updates each pulled arm's regression with its rows.

        Args:
            x: contexts, [n, ...] (flattened here).
            y: rewards, [n].
            arms: the arm pulled in each row, [n].
        """
        x = x.reshape(x.shape[0], -1)
        arms = torch.as_tensor(arms).reshape(-1).long()
        bad = (arms < 0) | (arms >= len(self.arms))
        if bool(bad.any()):
            raise ValueError(
                f"Invalid arm {int(arms[bad][0])}: arms are 0 <= arm < {len(self.arms)}."
            )
        regressions = self.regressions()
        for arm in torch.unique(arms).tolist():
            rows = arms == arm
            regressions[arm].partial_fit(x[rows], y[rows])


class DiscreteLinearModelUCB(DiscreteLinearModel):
    """`DiscreteLinearModel` scoring with the upper confidence bound (LinUCB)."""

    _exploration: ClassVar[dict[str, bool]] = {"use_ucb": True}


class DiscreteLinearModelThompsonSampling(DiscreteLinearModel):
    """`DiscreteLinearModel` scoring with a `theta` drawn per arm (linear TS)."""

    _exploration: ClassVar[dict[str, bool]] = {"sample_theta": True}


class ParametricLinearModel(_LinearBanditModel):
    """One `OnlineLinearRegression` shared by all items, over each item's features.

    The observation is a `Dict` with an "item" entry of shape `[num_items, feature_dim]`;
    action `i` picks item `i`. `model_config` may hold "alpha" (default 1) and "lambda_"
    (default 0.1, RLlib 1.13's).
    """

    def __init__(
        self,
        obs_space: gym.Space,
        action_space: gym.Space,
        num_outputs: int,
        model_config: dict,
        name: str,
    ) -> None:
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        alpha = model_config.get("alpha", 1.0)
        lambda_ = model_config.get("lambda_", 0.1)
        original = getattr(obs_space, "original_space", obs_space)
        if not (isinstance(original, gym.spaces.Dict) and "item" in original.spaces):
            raise ValueError(
                "ParametricLinearModel needs a Dict observation space with an 'item' entry "
                f"([num_items, feature_dim]); got {original}."
            )
        item_shape = original["item"].shape or ()
        if len(item_shape) != 2:
            raise ValueError(
                f"The 'item' observations must be [num_items, feature_dim]; got {item_shape}."
            )
        self.feature_dim = int(item_shape[-1])
        self.arm = OnlineLinearRegression(self.feature_dim, alpha=alpha, lambda_=lambda_)

    def _scores_for(self, input_dict: dict[str, Any]) -> TensorType:
        return self._items(input_dict["obs"])

    def _items(self, obs: Any) -> TensorType:
        """The "item" features [B, num_items, d] of observations (flat rows or dicts)."""
        if torch.is_tensor(obs):
            obs = restore_original_dimensions(obs, self.obs_space)
        items = obs["item"]
        if items.dim() != 3:
            raise ValueError(
                f"'item' observations must be [B, num_items, features]; got {tuple(items.shape)}."
            )
        return items

    def predict(
        self, x: TensorType, sample_theta: bool = False, use_ucb: bool = False
    ) -> TensorType:
        """Scores [B, num_items] of item features `x` [B, num_items, d]; with `use_ucb`
        plus 0.3 times the confidence width (RLlib 1.13's weight)."""
        self._cur_ctx = x
        scores = self.arm(x, sample_theta)
        if use_ucb:
            scores = scores + PARAMETRIC_UCB_WEIGHT * self.arm.get_ucbs(x)
        self._cur_value = scores
        return scores

    def partial_fit(self, x: Any, y: TensorType, arms: TensorType) -> None:
        """Updates the regression with the features of the chosen items.

        Args:
            x: observations: flat rows, or dicts with "item" [n, num_items, d].
            y: rewards, [n].
            arms: the item chosen in each row, [n].
        """
        items = self._items(x)
        arms = torch.as_tensor(arms).reshape(-1).long()
        if bool(((arms < 0) | (arms >= items.shape[1])).any()):
            raise ValueError(f"Invalid item index in {arms.tolist()}: {items.shape[1]} items.")
        chosen = items[torch.arange(len(arms)), arms]
        self.arm.partial_fit(chosen, y)


class ParametricLinearModelUCB(ParametricLinearModel):
    """`ParametricLinearModel` scoring with the upper confidence bound."""

    _exploration: ClassVar[dict[str, bool]] = {"use_ucb": True}


class ParametricLinearModelThompsonSampling(ParametricLinearModel):
    """`ParametricLinearModel` scoring with a drawn `theta` (linear TS)."""

    _exploration: ClassVar[dict[str, bool]] = {"sample_theta": True}
