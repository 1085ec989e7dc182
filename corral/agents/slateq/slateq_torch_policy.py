"""SlateQ's policy: acting on every slate's decomposed Q-value, and its two losses.

Ie et al. 2019 (arXiv:1905.12767). The model scores every slate ``A`` of the candidates
(`SlateQTorchModel`): ``Q(s, A) = sum_{i in A} P(i | s, A) Qbar(s, i)``; the exploration
(`SlateEpsilonGreedy` by default) picks a slate from those scores.

Learning, per replayed transition ``(s, A, r, s')`` whose response in ``s'`` says which
item ``i`` of ``A`` was clicked (if any):

- item values, by Q-learning on the clicked item only (the paper's SlateQ update)::

      Qbar(s, i) <- r + gamma (1 - terminated) max_{A'} sum_{j in A'} P(j | s', A') Qbar'(s', j),

  with ``Qbar'`` the target network and the choice model's probabilities; squared error
  (Huber with `use_huber`), weighted by prioritized replay's importance weights, averaged
  over the batch with 0 for the rows without a click (RLlib 1.13's);
- the user choice model (`UserChoiceModel`), by cross-entropy of the observed choice
  (a slot, or "no click") among the shown slate.

The item network steps centered RMSprop (`lr`, `lr_schedule`, `rmsprop_epsilon`, decay
0.95, as Dopamine's and RecSim's SlateQ), the choice model Adam (`lr_choice_model`).
"""

from __future__ import annotations

import copy
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch

from corral.agents.slateq.slateq_torch_model import (
    SlateQTorchModel,
    score_documents,
    slate_q_values,
)
from corral.models.torch.torch_action_dist import (
    TorchSlateMultiCategorical,
    enumerate_slates,
    slate_shape,
)
from corral.policy.policy_template import store_tower_stats, tower_stats
from corral.policy.sample_batch import SampleBatch
from corral.policy.torch_mixins import (
    PRIO_WEIGHTS,
    ReplayPolicyMixin,
    TargetNetworkMixin,
    bootstrap_discount,
    clip_and_step_each,
)
from corral.policy.torch_policy import LearningRateSchedule, TensorDict, TorchPolicy
from corral.utils.error import UnsupportedSpaceException
from corral.utils.torch_utils import huber_loss, make_adam

F = torch.nn.functional

# What SlateQ's observations look like (RecSim's, through RLlib's wrappers).
_RECSIM_OBS = (
    "RecSim's observation space: a Dict {'user': Box((E,)), 'doc': Dict({'0': Box((E,)), "
    "'1': ..., one per candidate}), 'response': Tuple(Dict({'click': Discrete(2), ...}) per "
    "slate slot)}"
)


def _is_response(space: gym.Space) -> bool:
    """Whether `space` is one slot's response: a Dict with a Discrete(2) "click"."""
    click = space.spaces.get("click") if isinstance(space, gym.spaces.Dict) else None
    return isinstance(click, gym.spaces.Discrete) and int(click.n) == 2


def _recsim_problem(space: gym.Space) -> str | None:
    """What keeps `space` from being a RecSim observation space (None: nothing)."""
    if not isinstance(space, gym.spaces.Dict) or not {"user", "doc", "response"} <= set(space):
        return "it needs the entries 'user', 'doc' and 'response'"
    user, docs, response = space["user"], space["doc"], space["response"]
    if not isinstance(user, gym.spaces.Box) or len(user.shape) != 1:
        return "'user' must be a 1-D Box"
    if not isinstance(docs, gym.spaces.Dict) or set(docs) != {str(i) for i in range(len(docs))}:
        return "'doc' must be a Dict with the keys '0', '1', ... (one per candidate)"
    if any(not isinstance(d, gym.spaces.Box) or d.shape != user.shape for d in docs.values()):
        return (
            "each document must be a Box of the user's shape (the choice scores are dot products)"
        )
    if not isinstance(response, gym.spaces.Tuple) or not all(map(_is_response, response)):
        return "'response' must be a Tuple of Dicts with a 'click' entry, Discrete(2)"
    return None


def validate_spaces(observation_space: gym.Space, action_space: gym.Space) -> tuple[int, int]:
    """``(num_candidates, slate_size)`` of SlateQ's spaces.

    Raises:
        UnsupportedSpaceException: the observation space is not RecSim's dict, or the
            action space not ``MultiDiscrete([num_candidates] * slate_size)`` matching it.
    """
    problem = _recsim_problem(observation_space)
    if problem is not None:
        raise UnsupportedSpaceException(
            f"SlateQ needs {_RECSIM_OBS}; {problem}. Got {observation_space}."
        )
    parts = cast(gym.spaces.Dict, observation_space).spaces
    num_docs = len(cast(gym.spaces.Dict, parts["doc"]))
    slate_size = len(cast(gym.spaces.Tuple, parts["response"]))
    try:
        shape = slate_shape(action_space)
    except ValueError as e:
        raise UnsupportedSpaceException(f"SlateQ: {e}") from None
    if shape != (num_docs, slate_size):
        raise UnsupportedSpaceException(
            f"SlateQ needs the action space MultiDiscrete([{num_docs}] * {slate_size}) for "
            f"{num_docs} candidates and {slate_size} response slots, got {action_space}."
        )
    return shape


class SlateQTorchPolicy(LearningRateSchedule, ReplayPolicyMixin, TargetNetworkMixin, TorchPolicy):
    """SlateQ: decomposed slate Q-learning with a user choice model (see the module)."""

    model: SlateQTorchModel
    target_model: SlateQTorchModel

    @staticmethod
    def get_default_config() -> dict:
        """SlateQ's `DEFAULT_CONFIG` (RLlib 1.13's policy-template defaults)."""
        from corral.agents.slateq.slateq import DEFAULT_CONFIG

        return DEFAULT_CONFIG

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        validate_spaces(observation_space, action_space)
        TorchPolicy.__init__(self, observation_space, action_space, config)
        # The model's outputs are one Q-value per slate of `model.slates`.
        self.dist_class = TorchSlateMultiCategorical
        LearningRateSchedule.__init__(self, config["lr"], config.get("lr_schedule"))
        self.init_target_network(tau=1.0)
        self.gamma = float(config["gamma"])

    @property
    def slates(self) -> torch.Tensor:
        """``[A, S]`` every slate the policy scores (RLlib 1.13's `policy.slates`)."""
        return self.model.slates

    def make_model(self, num_outputs: int) -> SlateQTorchModel:
        return SlateQTorchModel(
            self.preprocessor.observation_space,
            self.action_space,
            TorchSlateMultiCategorical.required_model_output_shape(
                self.action_space, self.config["model"]
            ),
            self.config["model"],
            "slateq_model",
            fcnet_hiddens_per_candidate=self.config["fcnet_hiddens_per_candidate"],
            choice_model=self.config.get("choice_model", "proportional"),
        )

    def make_optimizer(self) -> dict[str, torch.optim.Optimizer]:  # type: ignore[override]
        """Adam for the choice model, centered RMSprop for the item Q-network."""
        m, cfg = self.model, self.config
        return {
            "choice_model": make_adam(m.choice_model.parameters(), lr=cfg["lr_choice_model"]),
            "q_model": torch.optim.RMSprop(
                m.q_model.parameters(),
                lr=self.cur_lr,
                alpha=0.95,
                eps=cfg["rmsprop_epsilon"],
                centered=True,
            ),
        }

    # -- learning -----------------------------------------------------------

    def learn_step(self, batch: TensorDict, optimizers: Any) -> dict[str, Any]:
        """One gradient step of both networks on a minibatch of transitions.

        A loss function given through `with_updates(loss_fn=...)` (RLlib's form:
        `fn(policy, model, dist_class, batch) -> (choice_loss, q_loss)`) replaces the
        class's losses; as with RLlib's two optimisers, each trains its own network only."""
        for group in optimizers["q_model"].param_groups:
            group["lr"] = self.cur_lr
        if type(self).loss is not TorchPolicy.loss:
            out = self.loss(self.model, self.dist_class, batch)
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise ValueError(
                    f"{type(self).__name__}: a SlateQ loss function returns (choice_loss, "
                    f"q_loss), as RLlib's `build_slateq_losses`; got {type(out).__name__}."
                )
            choice_loss, q_loss = out
            clip_and_step_each(
                [
                    (choice_loss, self.model.choice_model.parameters()),
                    (q_loss, self.model.q_model.parameters()),
                ],
                optimizers,
                {"choice_loss": choice_loss, "q_loss": q_loss},
                self.config.get("grad_clip"),
            )
            return dict(self.extra_grad_info(batch))
        q_loss, choice_loss, _, stats = self.losses(self.model, batch)
        # The two losses have disjoint parameters: one backward pass of their sum gives
        # each network its own loss's gradient.
        self.clip_and_step(q_loss + choice_loss, optimizers, stats)
        return {k: v.detach() if torch.is_tensor(v) else v for k, v in stats.items()}

    def losses(
        self, model: SlateQTorchModel, batch: TensorDict
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """(item Q loss, choice loss, per-row TD error (0 without a click), stats)."""
        obs = model.unpack(batch[SampleBatch.OBS])
        next_obs = model.unpack(batch[SampleBatch.NEXT_OBS])
        actions = batch[SampleBatch.ACTIONS].long()
        # The user's response to this step's slate is in the next observation.
        clicks = next_obs.clicks.float()
        clicked = clicks.sum(dim=1) > 0

        q_items = model.get_q_values(obs.user, obs.docs)
        q_clicked = (q_items.gather(1, actions) * clicks).sum(dim=1)
        with torch.no_grad():
            target_items = self.target_model.get_q_values(next_obs.user, next_obs.docs)
            # The best next slate under the target item values and the current choice model.
            next_q = model.slate_q_values(next_obs.user, next_obs.docs, target_items).amax(1)
            not_done = 1.0 - batch[SampleBatch.TERMINATEDS].float()
            discount = bootstrap_discount(batch, self.gamma)
            target = batch[SampleBatch.REWARDS].float() + discount * not_done * next_q
        td_error = torch.where(clicked, q_clicked - target, torch.zeros_like(target))
        if self.config["use_huber"]:
            per_row = huber_loss(td_error, self.config["huber_threshold"])
        else:
            per_row = td_error.pow(2)
        weights = batch.get(PRIO_WEIGHTS)
        q_loss = (per_row if weights is None else weights.float() * per_row).mean()

        # The choice among the shown documents and "no click" (the last class).
        shown = obs.docs.gather(1, actions.unsqueeze(-1).expand(-1, -1, obs.docs.shape[-1]))
        logits = model.choice_model(obs.user, shown)
        choice = torch.where(
            clicked, clicks.argmax(dim=1), torch.full_like(actions[:, 0], shown.shape[1])
        )
        choice_loss = F.cross_entropy(logits, choice)

        with torch.no_grad():
            n_clicked = clicked.sum().clamp(min=1)
            stats = {
                "q_loss": q_loss,
                "choice_loss": choice_loss,
                "q_values": q_items.mean(),
                "q_clicked": q_clicked.sum() / n_clicked,
                "target_clicked": (target * clicked).sum() / n_clicked,
                "next_q_target_max": next_q.mean(),
                "mean_td_error": td_error.abs().sum() / n_clicked,
                "clicked_fraction": clicked.float().mean(),
                "choice_beta": model.choice_model.beta.detach(),
                "choice_score_no_click": model.choice_model.score_no_click.detach(),
                "cur_lr": float(self.cur_lr),
            }
        return q_loss, choice_loss, td_error.detach(), stats

    def compute_td_error(self, batch: SampleBatch) -> np.ndarray:
        """Per-row TD errors of the item values (0 for rows without a click), for
        prioritized replay."""
        with torch.no_grad():
            _, _, td_error, _ = self.losses(self.model, self.replay_tensors(batch))
        return td_error.numpy()


def get_per_slate_q_values(
    policy: SlateQTorchPolicy,
    score_no_click: torch.Tensor,
    scores: torch.Tensor,
    q_values: torch.Tensor,
) -> torch.Tensor:
    """RLlib 1.13's: ``[B, A]`` the value of each of the policy's slates from the item
    values ``q_values [B, C]`` and choice weights ``scores [B, C]``,
    ``score_no_click [B]`` (see `slate_q_values`)."""
    return slate_q_values(policy.slates.to(q_values.device), q_values, scores, score_no_click)


# -- RLlib 1.13's function forms (`build_policy_class` pieces) of this policy --------------


def build_slateq_model_and_distribution(
    policy: SlateQTorchPolicy, obs_space: gym.Space, action_space: gym.Space, config: dict
) -> tuple[SlateQTorchModel, type]:
    """RLlib 1.13's `make_model_and_action_dist`: a new `SlateQTorchModel` as
    `SlateQTorchPolicy` builds it (for the policy's spaces and config) and the slate
    distribution it acts with; like RLlib's, it gives `policy` a `target_model`, here a
    frozen copy of the new model."""
    model = SlateQTorchPolicy.make_model(policy, 0)  # (the model sizes its own outputs)
    policy.target_model = copy.deepcopy(model).requires_grad_(False)
    return model, TorchSlateMultiCategorical


def build_slateq_losses(
    policy: SlateQTorchPolicy, model: SlateQTorchModel, dist_class: Any, train_batch: TensorDict
) -> tuple[torch.Tensor, torch.Tensor]:
    """RLlib 1.13's loss function: `(choice_loss, q_loss)` of `SlateQTorchPolicy.losses`,
    its stats stored in `model.tower_stats` (read by `build_slateq_stats`)."""
    q_loss, choice_loss, _, stats = SlateQTorchPolicy.losses(policy, model, train_batch)
    store_tower_stats(model, stats)
    return choice_loss, q_loss


def build_slateq_stats(policy: TorchPolicy, batch: TensorDict) -> dict[str, Any]:
    """RLlib 1.13's stats function: the stats of the last `build_slateq_losses`
    (`q_loss`, `choice_loss`, `q_values`, `q_clicked`, `target_clicked`,
    `next_q_target_max`, `mean_td_error`, ...)."""
    return tower_stats(policy, batch)


def optimizer_fn(policy: SlateQTorchPolicy, config: dict) -> dict[str, torch.optim.Optimizer]:
    """RLlib 1.13's optimizer function: the optimisers `SlateQTorchPolicy` makes, Adam
    for the choice model and centered RMSprop for the item Q-network (by name:
    `choice_model`, `q_model`); `config` is the policy's (as RLlib passes it)."""
    return SlateQTorchPolicy.make_optimizer(policy)


def setup_early(
    policy: TorchPolicy, obs_space: gym.Space, action_space: gym.Space, config: dict
) -> None:
    """RLlib 1.13's `before_init`: every slate of the action space, ``[A, S]``, in the
    order `SlateQTorchModel` scores them (`enumerate_slates`), as `policy.slates` (a
    `SlateQTorchPolicy` reads its model's, the same) and `policy.slates_indices`
    (``[1, A * S]``)."""
    slates = enumerate_slates(*slate_shape(action_space))
    if not isinstance(getattr(type(policy), "slates", None), property):
        policy.slates = slates  # type: ignore[attr-defined]
    policy.slates_indices = slates.reshape(-1).unsqueeze(0)  # type: ignore[attr-defined]


def action_distribution_fn(
    policy: TorchPolicy,
    model: SlateQTorchModel,
    input_dict: dict[str, Any],
    *,
    explore: bool = True,
    is_training: bool = False,
    **kwargs: Any,
) -> tuple[torch.Tensor, type, list]:
    """RLlib 1.13's `action_distribution_fn`: every slate's Q-value (``[B, A]``, the
    model's `slate_q_values` of the unpacked observations, as its forward pass gives
    them), the slate distribution over them and no state."""
    obs = model.unpack(input_dict[SampleBatch.OBS])
    return model.slate_q_values(obs.user, obs.docs), TorchSlateMultiCategorical, []


def postprocess_fn_add_next_actions_for_sarsa(
    policy: TorchPolicy,
    batch: SampleBatch,
    other_agent: dict | None = None,
    episode: Any = None,
) -> SampleBatch:
    """RLlib 1.13's postprocess function: with `slateq_strategy: "SARSA"` in the config,
    each step's `next_actions` (the trajectory's actions shifted by one; the last step's
    wraps around), for a SARSA target; the batch must then end its episode. Other
    strategies (corral's SlateQ is Q-learning) leave the batch as it is.

    Raises:
        RuntimeError: SARSA on a batch that does not end an episode.
    """
    if policy.config.get("slateq_strategy") == "SARSA":
        ended = batch[SampleBatch.TERMINATEDS][-1] or batch[SampleBatch.TRUNCATEDS][-1]
        if not ended:
            raise RuntimeError(
                "slateq_strategy='SARSA' needs each sample batch to be a complete episode "
                "(batch_mode='complete_episodes'); this one does not end its episode."
            )
        batch["next_actions"] = np.roll(batch[SampleBatch.ACTIONS], -1, axis=0)
    return batch


def setup_late_mixins(
    policy: SlateQTorchPolicy, obs_space: gym.Space, action_space: gym.Space, config: dict
) -> None:
    """RLlib 1.13's `after_init`: the target network becomes a copy of the model (a hard
    update)."""
    if getattr(policy, "target_model", None) is None:
        policy.init_target_network(tau=1.0)
    policy.update_target(1.0)


__all__ = [
    "SlateQTorchPolicy",
    "action_distribution_fn",
    "postprocess_fn_add_next_actions_for_sarsa",
    "setup_early",
    "build_slateq_losses",
    "build_slateq_model_and_distribution",
    "build_slateq_stats",
    "optimizer_fn",
    "setup_late_mixins",
    "get_per_slate_q_values",
    "score_documents",
    "validate_spaces",
]
