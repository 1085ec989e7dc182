"""Policies and the batches they act on and learn from."""

from corral.policy.policy import Policy, PolicySpec
from corral.policy.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch

__all__ = ["DEFAULT_POLICY_ID", "MultiAgentBatch", "Policy", "PolicySpec", "SampleBatch"]
