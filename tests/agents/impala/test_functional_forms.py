"""RLlib 1.13's function forms of IMPALA's torch policy (`agents.impala.vtrace_torch_policy`:
`build_vtrace_loss`, `stats`, `choose_optimizer`, `setup_mixins`, `VTraceLoss`,
`make_time_major`)."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.impala.impala import DEFAULT_CONFIG
from corral.agents.impala.vtrace_torch_policy import (
    VTraceLoss,
    VTraceTorchPolicy,
    build_vtrace_loss,
    choose_optimizer,
    make_time_major,
    setup_mixins,
    stats,
)
from corral.policy.sample_batch import SampleBatch
from tests.fixtures.policy_batches import acted_trajectory

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACT = gym.spaces.Discrete(3)
CONFIG = {**DEFAULT_CONFIG, "entropy_coeff": 0.01, "rollout_fragment_length": 5}


def _tensors(batch):
    return {k: torch.as_tensor(np.asarray(v)) for k, v in batch.items()}


def _policy(cls=VTraceTorchPolicy, **config):
    torch.manual_seed(0)
    return cls(OBS, ACT, {**CONFIG, **config})


def test_build_vtrace_loss_is_the_class_loss_and_stats_its_stats():
    policy = _policy()
    batch = _tensors(acted_trajectory(policy, n=12))
    loss, class_stats = policy.loss(policy.model, policy.dist_class, batch)
    assert torch.allclose(build_vtrace_loss(policy, policy.model, policy.dist_class, batch), loss)
    fn_stats = stats(policy, batch)
    assert fn_stats.keys() == class_stats.keys()
    assert torch.allclose(fn_stats["vf_loss"], class_stats["vf_loss"])


def test_vtrace_loss_on_time_major_tensors_matches_the_class_loss():
    # One trajectory ending in a terminal step: RLlib's [T, B=1] layout, bootstrap 0.
    policy = _policy()
    batch = _tensors(acted_trajectory(policy, n=12))
    loss, _ = policy.loss(policy.model, policy.dist_class, batch)
    logits, values = policy.forward_train(batch)
    dist = policy.dist_class(logits, policy.model)
    actions = batch[SampleBatch.ACTIONS]

    def tm(t):
        return t.unsqueeze(1)

    vt = VTraceLoss(
        actions=actions.reshape(-1, 1, 1),
        actions_logp=tm(dist.logp(actions)),
        actions_entropy=tm(dist.entropy()),
        dones=tm(batch[SampleBatch.TERMINATEDS]),
        behaviour_action_logp=tm(batch[SampleBatch.ACTION_LOGP]),
        behaviour_logits=[tm(batch[SampleBatch.ACTION_DIST_INPUTS])],
        target_logits=[tm(logits)],
        discount=CONFIG["gamma"],
        rewards=tm(batch[SampleBatch.REWARDS]),
        values=tm(values),
        bootstrap_value=torch.zeros(1),
        dist_class=policy.dist_class,
        model=policy.model,
        valid_mask=None,
        config=policy.config,
        vf_loss_coeff=CONFIG["vf_loss_coeff"],
        entropy_coeff=policy.entropy_coeff,
        clip_rho_threshold=CONFIG["vtrace_clip_rho_threshold"],
        clip_pg_rho_threshold=CONFIG["vtrace_clip_pg_rho_threshold"],
    )
    assert torch.allclose(vt.total_loss, loss, atol=1e-5)
    assert vt.value_targets.shape == (12, 1)
    assert torch.isclose(vt.mean_entropy, dist.entropy().mean())


def test_make_time_major():
    policy = _policy()
    rows = torch.arange(10)  # two fragments of rollout_fragment_length=5
    tm = make_time_major(policy, None, rows)
    assert tm.shape == (5, 2) and tm[:, 1].tolist() == [5, 6, 7, 8, 9]
    assert make_time_major(policy, None, rows, drop_last=True).shape == (4, 2)
    assert [t.shape for t in make_time_major(policy, None, [rows, rows])] == [(5, 2)] * 2
    with pytest.raises(ValueError, match="not 2 runs of 5"):
        make_time_major(policy, None, torch.arange(11))


@pytest.mark.parametrize("opt_type", ["adam", "rmsprop"])
def test_choose_optimizer_is_the_class_optimizer(opt_type):
    policy = _policy(opt_type=opt_type)
    assert type(choose_optimizer(policy, policy.config)) is type(policy.make_optimizer())


def test_setup_mixins_restarts_the_schedules():
    policy = _policy(lr_schedule=[[0, 0.1], [100, 0.0]])
    policy.cur_lr = 0.5
    setup_mixins(policy, OBS, ACT, policy.config)
    assert policy.cur_lr == 0.1 and policy.entropy_coeff == CONFIG["entropy_coeff"]


def test_with_updates_of_a_scaled_loss_trains():
    seen = []

    def doubled(policy, model, dist_class, batch):
        loss = build_vtrace_loss(policy, model, dist_class, batch)
        seen.append(loss.item())
        return loss * 2

    policy = _policy(VTraceTorchPolicy.with_updates(name="Doubled", loss_fn=doubled))
    before = [p.detach().clone() for p in policy.model.parameters()]
    info = policy.learn_on_batch(acted_trajectory(policy, n=12))
    assert seen and any(not torch.equal(a, b) for a, b in zip(policy.model.parameters(), before))
    assert np.isclose(info["learner_stats"]["total_loss"], seen[0], rtol=1e-5)
