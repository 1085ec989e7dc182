"""Torch layers of RLlib 1.13's attention models (``corral.models.torch.attention_net``)."""

from corral.models.torch.modules.gru_gate import GRUGate
from corral.models.torch.modules.multi_head_attention import MultiHeadAttention
from corral.models.torch.modules.relative_multi_head_attention import (
    RelativeMultiHeadAttention,
    RelativePositionEmbedding,
)
from corral.models.torch.modules.skip_connection import SkipConnection

__all__ = [
    "GRUGate",
    "MultiHeadAttention",
    "RelativeMultiHeadAttention",
    "RelativePositionEmbedding",
    "SkipConnection",
]
