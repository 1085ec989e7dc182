"""RLlib 1.13's function forms of DDPG's torch policy (`ddpg_actor_critic_loss`,
`build_ddpg_stats`, `make_ddpg_optimizers`, `build_ddpg_models_and_action_dist`,
`before_init_fn`, `setup_late_mixins`, `ComputeTDErrorMixin`, `apply_gradients_fn`)."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.ddpg.ddpg import DEFAULT_CONFIG
from corral.agents.ddpg.ddpg_torch_model import DDPGTorchModel
from corral.agents.ddpg.ddpg_torch_policy import (
    ComputeTDErrorMixin,
    DDPGTorchPolicy,
    apply_gradients_fn,
    before_init_fn,
    build_ddpg_models_and_action_dist,
    build_ddpg_stats,
    ddpg_actor_critic_loss,
    make_ddpg_optimizers,
    setup_late_mixins,
)
from corral.models.torch.torch_action_dist import TorchDeterministic
from corral.policy.sample_batch import SampleBatch

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACT = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
CONFIG = {**DEFAULT_CONFIG, "twin_q": True}


def _policy(cls=DDPGTorchPolicy):
    torch.manual_seed(0)
    return cls(OBS, ACT, dict(CONFIG))


def _batch(n=16, seed=0):
    rng = np.random.default_rng(seed)
    return SampleBatch(
        {
            SampleBatch.OBS: rng.uniform(-1, 1, (n, 3)).astype(np.float32),
            SampleBatch.ACTIONS: rng.uniform(-1, 1, (n, 1)).astype(np.float32),
            SampleBatch.REWARDS: rng.normal(size=n).astype(np.float32),
            SampleBatch.NEXT_OBS: rng.uniform(-1, 1, (n, 3)).astype(np.float32),
            SampleBatch.TERMINATEDS: rng.random(n) < 0.2,
        }
    )


def _tensors(batch):
    return {k: torch.as_tensor(np.asarray(v)) for k, v in batch.items()}


def _weights(params):
    return [p.detach().clone() for p in params]


def _changed(before, params):
    return any(not torch.equal(a, b) for a, b in zip(before, params))


def test_ddpg_actor_critic_loss_is_the_class_losses_and_stats_rllibs():
    policy = _policy()
    batch = _tensors(_batch())
    actor, critic, info = policy.actor_critic_losses(batch)
    fn_actor, fn_critic = ddpg_actor_critic_loss(policy, policy.model, None, batch)
    assert torch.allclose(fn_actor, actor) and torch.allclose(fn_critic, critic)
    stats = build_ddpg_stats(policy, batch)
    assert set(stats) == {
        "actor_loss",
        "critic_loss",
        "mean_q",
        "max_q",
        "min_q",
        "mean_td_error",
    }
    # RLlib's td_error of twin critics: the sum of both critics' errors.
    assert torch.allclose(policy.td_error, info["td_error"].sum(0))
    assert torch.allclose(stats["mean_q"], info["q_t"][0].mean())
    assert policy.q_t is not None and policy.critic_loss is fn_critic


def test_with_updates_of_a_scaled_loss_trains_both_networks():
    def doubled(policy, model, dist_class, batch):
        actor, critic = ddpg_actor_critic_loss(policy, model, dist_class, batch)
        return actor * 2, critic * 2

    policy = _policy(
        DDPGTorchPolicy.with_updates(name="Doubled", loss_fn=doubled, stats_fn=build_ddpg_stats)
    )
    actor, critic = policy.model.policy_variables(), policy.model.q_variables()
    before_actor, before_critic = _weights(actor), _weights(critic)
    info = policy.learn_on_batch(_batch())
    assert _changed(before_actor, actor) and _changed(before_critic, critic)
    assert np.isfinite(info["learner_stats"]["critic_loss"])


def test_each_loss_of_a_loss_function_trains_its_own_network_only():
    # An actor loss through the critics' weights must not move them (RLlib's separate
    # optimisers): with the critics' loss at 0, only the actor changes.
    def actor_only(policy, model, dist_class, batch):
        obs = batch[SampleBatch.OBS]
        actor = -model.q_ensemble(obs, model.get_policy_output(obs))[0].mean()
        _, critic = ddpg_actor_critic_loss(policy, model, dist_class, batch)
        return actor, critic * 0.0

    policy = _policy(DDPGTorchPolicy.with_updates(name="ActorOnly", loss_fn=actor_only))
    actor, critic = policy.model.policy_variables(), policy.model.q_variables()
    before_actor, before_critic = _weights(actor), _weights(critic)
    policy.learn_on_batch(_batch())
    assert _changed(before_actor, actor) and not _changed(before_critic, critic)


def test_a_loss_function_not_returning_two_losses_is_refused():
    policy = _policy(
        DDPGTorchPolicy.with_updates(
            name="One", loss_fn=lambda p, m, d, b: sum(ddpg_actor_critic_loss(p, m, d, b))
        )
    )
    with pytest.raises(ValueError, match=r"\(actor_loss, critic_loss\)"):
        policy.learn_on_batch(_batch())


def test_make_ddpg_optimizers_is_the_class_optimizer():
    policy = _policy()
    opt = make_ddpg_optimizers(policy, policy.config)
    assert [g["name"] for g in opt.param_groups] == ["actor", "critic"]
    assert [g["lr"] for g in opt.param_groups] == [CONFIG["actor_lr"], CONFIG["critic_lr"]]


def test_models_mixins_and_td_errors():
    policy = _policy()
    model, dist_class = build_ddpg_models_and_action_dist(policy, OBS, ACT, policy.config)
    assert isinstance(model, DDPGTorchModel) and dist_class is TorchDeterministic
    assert policy.target_model is not model and isinstance(policy.target_model, DDPGTorchModel)
    policy.model = model
    setup_late_mixins(policy, OBS, ACT, policy.config)
    for p, t in zip(policy.model.parameters(), policy.target_model.parameters()):
        assert torch.equal(p, t)
    policy.num_critic_updates = 5
    before_init_fn(policy, OBS, ACT, policy.config)
    assert policy.num_critic_updates == 0
    # RLlib's six-array form of compute_td_error gives the batch form's errors.
    assert isinstance(policy, ComputeTDErrorMixin)
    b = _batch()
    rllib_form = policy.compute_td_error(
        b[SampleBatch.OBS],
        b[SampleBatch.ACTIONS],
        b[SampleBatch.REWARDS],
        b[SampleBatch.NEXT_OBS],
        b[SampleBatch.TERMINATEDS],
        np.ones(len(b), np.float32),
    )
    assert np.allclose(rllib_form, policy.compute_td_error(b))


def test_apply_gradients_fn_steps_the_actor_every_policy_delay_calls():
    torch.manual_seed(0)
    policy = DDPGTorchPolicy(OBS, ACT, {**CONFIG, "policy_delay": 2})
    params = [p for g in policy.make_optimizer().param_groups for p in g["params"]]
    grads = [np.ones(p.shape, np.float32) for p in params]
    actor, critic = policy.model.policy_variables(), policy.model.q_variables()

    def snapshot():
        return [p.detach().clone() for p in actor], [p.detach().clone() for p in critic]

    def moved(before, now):
        return any(not torch.equal(a, b) for a, b in zip(before, now))

    actor0, critic0 = snapshot()
    apply_gradients_fn(policy, grads)  # update 1 of policy_delay=2: critics only
    actor1, critic1 = snapshot()
    assert moved(critic0, critic1) and not moved(actor0, actor1)
    apply_gradients_fn(policy, grads)  # update 2: the actor too
    actor2, critic2 = snapshot()
    assert moved(critic1, critic2) and moved(actor1, actor2)
    assert policy.num_critic_updates == 2
    with pytest.raises(ValueError, match="one per"):
        apply_gradients_fn(policy, grads[:-1])
