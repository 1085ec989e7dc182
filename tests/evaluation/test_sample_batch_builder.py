"""RLlib 1.13's SampleBatchBuilder / MultiAgentSampleBatchBuilder, a3c.DEFAULT_CONFIG and
MAML's KLCoeffMixin at their RLlib paths."""

from __future__ import annotations

import numpy as np

from corral.evaluation import SampleBatchBuilder
from corral.evaluation.sample_batch_builder import MultiAgentSampleBatchBuilder


def test_sample_batch_builder_rows_and_batches():
    builder = SampleBatchBuilder()
    for t in range(3):
        builder.add_values(obs=np.full(2, t, np.float64), actions=t, rewards=1.0, t=t)
    assert builder.count == 3
    batch = builder.build_and_reset()
    assert batch.count == 3 and batch["obs"].dtype == np.float32
    assert len(set(batch["unroll_id"])) == 1
    assert builder.count == 0
    builder.add_batch(batch)
    assert builder.build_and_reset().count == 3


class _Policy:
    def __init__(self):
        self.others = None

    def postprocess_trajectory(self, batch, other_agent_batches=None, episode=None):
        self.others = other_agent_batches
        batch["advantages"] = batch["rewards"] * 2
        return batch


def test_multi_agent_builder_postprocesses_per_agent():
    policies = {"p": _Policy(), "q": _Policy()}
    builder = MultiAgentSampleBatchBuilder(policies, clip_rewards=True, callbacks=None)
    for t in range(2):
        builder.add_values("a", "p", obs=[0.0], rewards=5.0, t=t)
        builder.add_values("b", "q", obs=[1.0], rewards=-3.0, t=t)
        builder.count += 1
    assert builder.total() == 4 and builder.has_pending_agent_data()
    batch = builder.build_and_reset()
    assert batch.count == 2
    np.testing.assert_array_equal(batch.policy_batches["p"]["advantages"], [2.0, 2.0])
    np.testing.assert_array_equal(batch.policy_batches["q"]["rewards"], [-1.0, -1.0])
    policy, other = policies["p"].others["b"]
    assert policy is policies["q"] and other.count == 2


def test_a3c_default_config_and_maml_kl_coeff_mixin():
    from corral.agents import a3c
    from corral.agents.maml.maml_torch_policy import KLCoeffMixin

    assert a3c.DEFAULT_CONFIG["rollout_fragment_length"] == 10
    assert a3c.DEFAULT_CONFIG["sample_async"] is True

    class P:
        pass

    p = P()
    KLCoeffMixin.__init__(p, {"kl_coeff": 0.2, "kl_target": 0.01, "num_workers": 2})
    assert p.kl_coeff_val == [0.2, 0.2]
    assert KLCoeffMixin.update_kls(p, [0.0, 1.0]) == [0.1, 0.4]
