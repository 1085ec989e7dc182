"""SlateQ's networks: the item Q-network, the user choice model, and the model that scores
every slate.

SlateQ (Ie et al. 2019, "SlateQ: A Tractable Decomposition for Reinforcement Learning with
Recommendation Sets", arXiv:1905.12767) decomposes the value of a slate ``A`` into the
values of its items (the paper's decomposition)::

    Q(s, A) = sum_{i in A} P(i | s, A) Qbar(s, i),

where ``Qbar(s, i)`` is the long-term value of the user clicking item ``i`` (a "no click"
has value 0, as in RecSim's and RLlib's implementations) and ``P(i | s, A)`` is the user's
choice model. With a conditional-logit-like choice model that gives each document a weight
``v(s, i) >= 0`` and "no click" a weight ``v_0(s)`` (the paper's conditional choice model),
``P(i | s, A) = v(s, i) / (sum_{j in A} v(s, j) + v_0(s))``. Observations are RecSim's dict
``{"user": ..., "doc": {"0": ..., ...}, "response": (...)}`` as flat rows; the model gets
them back with `restore_original_dimensions`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import gymnasium as gym
import torch
from torch import nn

from corral.models.preprocessors import preprocessor_for_space, restore_original_dimensions
from corral.models.torch.misc import SlimFC
from corral.models.torch.torch_action_dist import enumerate_slates, slate_shape
from corral.models.torch.torch_modelv2 import ModelConfigDict, TensorType, TorchModelV2

F = nn.functional

# The user choice models a SlateQ model weights item values with (config key `choice_model`).
CHOICE_MODELS = ("proportional", "learned")


class RecSimObs(NamedTuple):
    """A batch of RecSim observations as tensors.

    Attributes:
        user: ``[B, E]`` the user's features.
        docs: ``[B, C, E]`` the candidate documents' features (candidate ``i`` is key
            ``str(i)``).
        clicks: ``[B, S]`` 1.0 where the previous slate's slot was clicked.
    """

    user: TensorType
    docs: TensorType
    clicks: TensorType


def _flat_size(obs_space: gym.Space) -> int:
    """Columns of a flat observation row of the preprocessed `obs_space`."""
    return int(math.prod(obs_space.shape or ()))


def _stacked(docs: TensorType | Sequence[TensorType]) -> TensorType:
    """Documents ``[B, C, E]`` from a tensor or RLlib's list of C ``[B, E]`` tensors."""
    return docs if torch.is_tensor(docs) else torch.stack(list(docs), dim=1)


class QValueModel(nn.Module):
    """``Qbar(s, i)``: the value of the user clicking candidate ``i``, one per candidate.

    One MLP over ``[user features, document features]`` (ReLU layers of
    `fcnet_hiddens_per_candidate`, then one output), applied to every candidate with the
    same weights: a candidate's slot number carries no meaning when candidates are drawn
    anew each step. (RLlib 1.13 gave each candidate slot its own MLP.)

    Args:
        obs_space: the RecSim observation space (a Dict with "user" and "doc"), or the
            preprocessed space whose ``original_space`` it is.
        fcnet_hiddens_per_candidate: the MLP's hidden layer sizes.
    """

    def __init__(
        self, obs_space: gym.Space, fcnet_hiddens_per_candidate: Sequence[int] = (256, 32)
    ) -> None:
        super().__init__()
        original: Any = getattr(obs_space, "original_space", obs_space)
        user_size = int(original["user"].shape[0])
        doc_size = int(original["doc"]["0"].shape[0])
        self.num_candidates = len(original["doc"])
        layers: list[nn.Module] = []
        size = user_size + doc_size
        for hidden in fcnet_hiddens_per_candidate:
            layers.append(SlimFC(size, int(hidden), activation_fn="relu"))
            size = int(hidden)
        layers.append(SlimFC(size, 1))
        self.layers = nn.Sequential(*layers)

    def forward(self, user: TensorType, docs: TensorType | Sequence[TensorType]) -> TensorType:
        """``[B, C]`` item values for ``user [B, U]`` and ``docs [B, C, D]`` (or a list of
        C ``[B, D]`` tensors)."""
        docs = _stacked(docs)
        pairs = torch.cat([user.unsqueeze(1).expand(-1, docs.shape[1], -1), docs], dim=-1)
        return self.layers(pairs).squeeze(-1)


class UserChoiceModel(nn.Module):
    """A conditional (multinomial) logit model of the user's click, with learned weights.

    The logit of clicking document ``d`` is ``beta * <user, d>``, that of not clicking a
    learned ``score_no_click``; the click probabilities among the shown documents and
    "no click" are the softmax of these logits (RLlib 1.13's model; both parameters
    start at 0).
    """

    def __init__(self) -> None:
        super().__init__()
        self.beta = nn.Parameter(torch.tensor(0.0))
        self.score_no_click = nn.Parameter(torch.tensor(0.0))

    def forward(self, user: TensorType, doc: TensorType) -> TensorType:
        """Logits ``[B, D + 1]`` (the last: no click) for ``user [B, E]``, ``doc [B, D, E]``."""
        affinity = torch.einsum("be,bde->bd", user, doc)
        no_click = self.score_no_click.expand(user.shape[0], 1)
        return torch.cat([self.beta * affinity, no_click], dim=1)


def score_documents(
    user_obs: TensorType,
    doc_obs: TensorType | Sequence[TensorType],
    no_click_score: float = 1.0,
    multinomial_logits: bool = False,
    min_normalizer: float = -1.0,
) -> tuple[TensorType, TensorType]:
    """Fixed choice-model scores: the dot products of user and document features.

    RecSim's multinomial proportional choice model (RLlib 1.13's SlateQ acts with it):
    each document's score is ``<user, doc> - min_normalizer`` and "no click"'s is
    ``no_click_score - min_normalizer``; with `multinomial_logits`, the softmax of the
    unshifted scores instead (a conditional logit with unit weights).

    Args:
        user_obs: ``[B, E]`` user features.
        doc_obs: ``[B, C, E]`` documents, or a list of C ``[B, E]`` tensors.
        no_click_score: the "no click" option's score.
        multinomial_logits: softmax the scores (else shift them by `min_normalizer`).
        min_normalizer: subtracted from every score (proportional model).

    Returns:
        ``(scores [B, C], score_no_click [B])``.
    """
    per_doc = torch.einsum("be,bce->bc", user_obs, _stacked(doc_obs))
    no_click = torch.full_like(per_doc[:, :1], float(no_click_score))
    scores = torch.cat([per_doc, no_click], dim=1)
    scores = torch.softmax(scores, dim=1) if multinomial_logits else scores - min_normalizer
    return scores[:, :-1], scores[:, -1]


def slate_q_values(
    slates: TensorType, q_values: TensorType, scores: TensorType, score_no_click: TensorType
) -> TensorType:
    """Every slate's value ``Q(s, A) = sum_{i in A} v_i Qbar_i / (sum_{i in A} v_i + v_0)``.

    Args:
        slates: ``[A, S]`` the candidates of each slate.
        q_values: ``[B, C]`` item values ``Qbar(s, i)``.
        scores: ``[B, C]`` choice weights ``v(s, i) >= 0``.
        score_no_click: ``[B]`` the "no click" weight ``v_0(s) >= 0``.

    Returns:
        ``[B, A]`` the slates' values.
    """
    weighted = (scores * q_values)[:, slates].sum(-1)
    normalizer = scores[:, slates].sum(-1) + score_no_click.unsqueeze(-1)
    return weighted / normalizer


class SlateQTorchModel(TorchModelV2, nn.Module):
    """SlateQ's model: the item Q-network, the user choice model and the slate scores.

    Its output is one Q-value per slate (``[B, A]``, the slates of the `slates` buffer,
    ``[A, S]``: every ordered choice of ``S`` distinct candidates), the inputs of a
    `TorchSlateMultiCategorical`; `value_function()` is the best slate's value.

    Args:
        obs_space: the preprocessed observation space (``original_space``: RecSim's dict),
            or RecSim's dict itself.
        action_space: ``MultiDiscrete([num_candidates] * slate_size)``.
        num_outputs: the number of slates (the output size; not otherwise used).
        model_config: the policy's ``model`` config.
        name: the model's name.
        fcnet_hiddens_per_candidate: hidden layers of the item Q-network.
        choice_model: the choice weights item values are combined with (`CHOICE_MODELS`):
            "proportional", RecSim's fixed model (`score_documents`: ``<user, doc> + 1``,
            "no click" 2; a negative weight counts as 0), or "learned", the trained
            `UserChoiceModel` (weights ``exp(logit)``). The choice model is trained
            either way.
    """

    # Buffers (registered in `__init__`).
    slates: torch.Tensor
    user_columns: torch.Tensor
    doc_columns: torch.Tensor
    click_columns: torch.Tensor

    def __init__(
        self,
        obs_space: gym.Space,
        action_space: gym.Space,
        num_outputs: int,
        model_config: ModelConfigDict,
        name: str,
        *,
        fcnet_hiddens_per_candidate: Sequence[int] = (256, 32),
        choice_model: str = "proportional",
    ) -> None:
        if getattr(obs_space, "original_space", None) is None:  # the env's dict itself
            obs_space = preprocessor_for_space(obs_space).observation_space
        nn.Module.__init__(self)
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        if choice_model not in CHOICE_MODELS:
            raise ValueError(f"choice_model={choice_model!r}: expected one of {CHOICE_MODELS}.")
        self.choice_model_kind = choice_model
        self.choice_model = UserChoiceModel()
        self.q_model = QValueModel(obs_space, fcnet_hiddens_per_candidate)
        self.register_buffer(
            "slates", enumerate_slates(*slate_shape(action_space)), persistent=False
        )
        # The columns of the flat observation rows holding each part (user [E], docs
        # [C, E], the previous slate's "clicked" flags [S]), found once by restoring a row
        # of column numbers: unpacking a batch is then three index selections.
        columns = restore_original_dimensions(
            torch.arange(_flat_size(obs_space), dtype=torch.float32).unsqueeze(0), obs_space
        )
        docs = columns["doc"]
        user_cols = columns["user"][0].long()
        doc_cols = torch.stack([docs[str(i)][0] for i in range(len(docs))]).long()
        # (Discrete(2) clicks travel one-hot: the second column is "clicked".)
        click_cols = torch.stack([r["click"][0, 1] for r in columns["response"]]).long()
        self.register_buffer("user_columns", user_cols, persistent=False)
        self.register_buffer("doc_columns", doc_cols, persistent=False)
        self.register_buffer("click_columns", click_cols, persistent=False)
        self._values: TensorType | None = None

    def get_q_values(self, user: TensorType, docs: TensorType | Sequence[TensorType]) -> TensorType:
        """``[B, C]`` item values ``Qbar(s, i)`` of the candidates."""
        return self.q_model(user, docs)

    def choice_scores(self, user: TensorType, docs: TensorType) -> tuple[TensorType, TensorType]:
        """``(v [B, C], v_0 [B])``: the choice weights of the candidates and of "no click"."""
        if self.choice_model_kind == "learned":
            logits = self.choice_model(user, docs)
            weights = torch.exp(logits - logits.amax(dim=1, keepdim=True))
            return weights[:, :-1], weights[:, -1]
        scores, no_click = score_documents(user, docs)
        return scores.clamp(min=0.0), no_click

    def slate_q_values(
        self, user: TensorType, docs: TensorType, q_values: TensorType | None = None
    ) -> TensorType:
        """``[B, A]`` every slate's value, from this model's item values (or `q_values`)."""
        if q_values is None:
            q_values = self.get_q_values(user, docs)
        scores, no_click = self.choice_scores(user, docs)
        return slate_q_values(self.slates, q_values, scores, no_click)

    def unpack(self, obs: TensorType) -> RecSimObs:
        """Flat observation rows ``[B, n]`` -> `RecSimObs`."""
        return RecSimObs(
            user=obs[:, self.user_columns],
            docs=obs[:, self.doc_columns],
            clicks=obs[:, self.click_columns],
        )

    def forward(
        self, input_dict: dict[str, Any], state: list[TensorType], seq_lens: TensorType | None
    ) -> tuple[TensorType, list[TensorType]]:
        obs = self.unpack(input_dict.get("obs_flat", input_dict["obs"]))
        q = self.slate_q_values(obs.user, obs.docs)
        self._values = q.amax(dim=1)
        return q, state

    def value_function(self) -> TensorType:
        if self._values is None:
            raise ValueError("value_function() called before forward().")
        return self._values


__all__ = [
    "CHOICE_MODELS",
    "F",
    "QValueModel",
    "RecSimObs",
    "SlateQTorchModel",
    "UserChoiceModel",
    "score_documents",
    "slate_q_values",
]
