"""Off-policy estimation: the return a policy would get, estimated from offline data.

`input_evaluation` names the estimators a rollout worker reading offline input runs on
every batch it reads: "is" (`ImportanceSampling`), "wis" (`WeightedImportanceSampling`),
"dm" (`DirectMethod`) and "dr" (`DoublyRobust`), the last two on a Q model fitted by FQE
(`FQETorchModel`). "simulation" is no estimator: the worker runs its env next to the
offline input and reports the real episodes (see `corral.offline.estimators.runner`).
`train()` reports the mean of each estimator's metrics over the episodes estimated in the
iteration, as `off_policy_estimator/<name>/<metric>` (RLlib 1.x's layout).
"""

from corral.offline.estimators.direct_method import DirectMethod, DoublyRobust
from corral.offline.estimators.fqe_torch_model import FQETorchModel
from corral.offline.estimators.importance_sampling import (
    ImportanceSampling,
    WeightedImportanceSampling,
)
from corral.offline.estimators.off_policy_estimator import (
    OffPolicyEstimate,
    OffPolicyEstimator,
    action_log_likelihood,
)
from corral.offline.estimators.runner import (
    ESTIMATORS,
    SIMULATION,
    collect_off_policy_estimates,
    estimate_off_policy,
    make_estimators,
    summarize_estimates,
)

__all__ = [
    "ESTIMATORS",
    "SIMULATION",
    "DirectMethod",
    "DoublyRobust",
    "FQETorchModel",
    "ImportanceSampling",
    "OffPolicyEstimate",
    "OffPolicyEstimator",
    "WeightedImportanceSampling",
    "action_log_likelihood",
    "collect_off_policy_estimates",
    "estimate_off_policy",
    "make_estimators",
    "summarize_estimates",
]
