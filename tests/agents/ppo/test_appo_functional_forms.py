"""RLlib 1.13's function forms of APPO's torch policy (`appo_surrogate_loss`, `stats`,
`setup_early_mixins`, `setup_late_mixins`, `add_values`) and its plan operator
`UpdateTargetAndKL`."""

import gymnasium as gym
import numpy as np
import torch

from corral.agents.ppo.appo import DEFAULT_CONFIG, UpdateTargetAndKL
from corral.agents.ppo.appo_torch_policy import (
    APPOTorchPolicy,
    add_values,
    appo_surrogate_loss,
    setup_early_mixins,
    setup_late_mixins,
    stats,
)
from corral.execution.common import _get_shared_metrics
from corral.execution.local_iterator import LocalIterator, SharedMetrics
from corral.policy.sample_batch import SampleBatch
from tests.fixtures.policy_batches import acted_trajectory

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACT = gym.spaces.Discrete(2)
CONFIG = {**DEFAULT_CONFIG, "use_kl_loss": True}


def _tensors(batch):
    return {k: torch.as_tensor(np.asarray(v)) for k, v in batch.items()}


def _policy(cls=APPOTorchPolicy):
    torch.manual_seed(0)
    return cls(OBS, ACT, dict(CONFIG))


def _perturb(policy):
    with torch.no_grad():
        for p in policy.model.parameters():
            p.add_(0.1)


def test_appo_surrogate_loss_is_the_class_loss_and_stats_its_stats():
    policy = _policy()
    batch = _tensors(acted_trajectory(policy, n=12))
    _perturb(policy)  # the current policy moves away from the target one
    loss, class_stats = policy.loss(policy.model, policy.dist_class, batch)
    fn_loss = appo_surrogate_loss(policy, policy.model, policy.dist_class, batch)
    assert torch.allclose(fn_loss, loss)
    fn_stats = stats(policy, batch)
    assert fn_stats.keys() == class_stats.keys()
    assert float(fn_stats["kl"]) > 0.0 and torch.allclose(fn_stats["kl"], class_stats["mean_kl"])


def test_setup_mixins_reset_the_kl_coefficient_and_sync_the_target():
    policy = _policy()
    _perturb(policy)
    policy.kl_coeff, policy.cur_lr = 7.0, 1.0
    setup_early_mixins(policy, OBS, ACT, policy.config)
    setup_late_mixins(policy, OBS, ACT, policy.config)
    assert policy.kl_coeff == CONFIG["kl_coeff"] and policy.cur_lr == CONFIG["lr"]
    for p, t in zip(policy.model.parameters(), policy.target_model.parameters()):
        assert torch.equal(p, t)
    obs = np.zeros(4, np.float32)
    assert np.isclose(policy._value(obs=obs), policy.value(obs[None])[0], atol=1e-6)


def test_with_updates_of_a_scaled_loss_trains():
    cls = APPOTorchPolicy.with_updates(
        name="Doubled", loss_fn=lambda p, m, d, b: appo_surrogate_loss(p, m, d, b) * 2
    )
    policy = _policy(cls)
    before = [p.detach().clone() for p in policy.model.parameters()]
    info = policy.learn_on_batch(acted_trajectory(policy, n=12))
    assert any(not torch.equal(a, b) for a, b in zip(policy.model.parameters(), before))
    assert np.isfinite(info["learner_stats"]["policy_loss"])


def test_update_target_and_kl_in_a_plan():
    policy = _policy()
    _perturb(policy)

    class Worker:
        def foreach_trainable_policy(self, fn):
            return [fn(policy, "default_policy")]

    class Workers:
        def local_worker(self):
            return Worker()

    # Target every num_sgd_iter * minibatch_buffer_size = 4 steps sampled (strictly more).
    op = UpdateTargetAndKL(Workers(), {**CONFIG, "num_sgd_iter": 2, "minibatch_buffer_size": 2})
    fetches = {"default_policy": {"learner_stats": {"kl": 1.0}}}  # far above kl_target

    def step(x):
        _get_shared_metrics().counters["num_steps_sampled"] += 3
        op(fetches)
        return policy.kl_coeff

    it = LocalIterator(lambda _t: iter(range(3)), SharedMetrics()).for_each(step)
    coeffs = list(it)
    # 3 steps: nothing; 6 steps (> 4 since 0): target and KL; 9 steps (3 since 6): nothing.
    assert coeffs == [1.0, 1.5, 1.5]
    assert it.shared_metrics.get().counters["num_target_updates"] == 1
    for p, t in zip(policy.model.parameters(), policy.target_model.parameters()):
        assert torch.equal(p, t)


def test_add_values_fetches_values_only_without_vtrace():
    obs = np.random.default_rng(0).uniform(-1, 1, (5, 4)).astype(np.float32)
    cls = APPOTorchPolicy.with_updates(name="WithValues", extra_action_out_fn=add_values)
    torch.manual_seed(0)
    gae = cls(OBS, ACT, {**CONFIG, "vtrace": False})
    _, extra = gae.compute_actions_from_obs(obs)
    assert np.allclose(extra[SampleBatch.VF_PREDS], gae.value(obs), atol=1e-6)
    info = gae.learn_on_batch(gae.postprocess_trajectory(acted_trajectory(gae, n=12)))
    assert np.isfinite(info["learner_stats"]["vf_loss"])
    vtrace = _policy(cls)
    _, extra = vtrace.compute_actions_from_obs(obs)
    assert SampleBatch.VF_PREDS not in extra
