"""RLlib 1.13's type aliases (``ray.rllib.utils.typing``), for annotations in user code.

Importing this module is cheap: it imports neither torch nor gymnasium (the forward
references name them as strings).
"""

# ruff: noqa: UP007, UP045
# (These are runtime aliases, some with string forward references: `X | "Y"` cannot be
# evaluated, so they keep `Union`/`Optional` throughout.)

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Optional, TypeVar, Union

if TYPE_CHECKING:
    import gymnasium

    from corral.env.env_context import EnvContext
    from corral.policy.policy import PolicySpec
    from corral.policy.sample_batch import MultiAgentBatch, SampleBatch

# A tensor of the framework in use (torch.Tensor, or a numpy array on the sampling side).
TensorType = Any
# A (possibly nested) structure of tensors.
TensorStructType = Union[TensorType, dict, tuple]
TensorShape = Union[tuple[int, ...], list[int]]
TrainerConfigDict = dict
PartialTrainerConfigDict = dict
ModelConfigDict = dict
# Something `from_config` can build: a config dict with "type", a class or a class path.
FromConfigSpec = Union[dict[str, Any], type, str]
EnvConfigDict = dict
EnvID = Union[int, str]
EnvType = Any
EnvCreator = Callable[["EnvContext"], Optional[EnvType]]
AgentID = Any
PolicyID = str
MultiAgentPolicyConfigDict = dict[PolicyID, "PolicySpec"]
PolicyState = dict[str, TensorStructType]
EpisodeID = int
UnrollID = int
MultiAgentDict = dict[AgentID, Any]
MultiEnvDict = dict[EnvID, MultiAgentDict]
EnvObsType = Any
EnvActionType = Any
EnvInfoDict = dict
FileType = Any
ViewRequirementsDict = dict[str, Any]
ResultDict = dict
LocalOptimizer = "torch.optim.Optimizer"
GradInfoDict = dict
LearnerStatsDict = dict
ModelGradients = Union[list[tuple[TensorType, TensorType]], list[TensorType]]
ModelWeights = dict
ModelInputDict = dict[str, TensorType]
SampleBatchType = Union["SampleBatch", "MultiAgentBatch"]
SpaceStruct = Union["gymnasium.spaces.Space", dict, tuple]
T = TypeVar("T")
