"""RLlib 1.13's function forms of A3C's torch policy (`actor_critic_loss`, `stats`,
`torch_optimizer`, `add_advantages`, `setup_mixins`, `ValueNetworkMixin`,
`vf_preds_fetches`)."""

import gymnasium as gym
import numpy as np
import torch

from corral.agents.a3c.a2c import A2C_DEFAULT_CONFIG
from corral.agents.a3c.a3c_torch_policy import (
    A3CTorchPolicy,
    ValueNetworkMixin,
    actor_critic_loss,
    add_advantages,
    setup_mixins,
    stats,
    torch_optimizer,
    vf_preds_fetches,
)
from corral.policy.policy_template import build_policy_class
from corral.policy.sample_batch import SampleBatch
from corral.policy.torch_policy import EntropyCoeffSchedule, LearningRateSchedule
from tests.fixtures.policy_batches import acted_trajectory

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACT = gym.spaces.Discrete(2)
CONFIG = {**A2C_DEFAULT_CONFIG, "entropy_coeff": 0.01}


def _array(value):
    return value.detach().numpy() if torch.is_tensor(value) else np.asarray(value)


def _tensors(batch):
    return {k: torch.as_tensor(np.asarray(v)) for k, v in batch.items()}


def _policy(cls=A3CTorchPolicy):
    torch.manual_seed(0)
    return cls(OBS, ACT, dict(CONFIG))


def test_actor_critic_loss_is_the_class_loss_and_stats_its_stats():
    policy = _policy()
    batch = _tensors(add_advantages(policy, acted_trajectory(policy)))
    loss, class_stats = policy.loss(policy.model, policy.dist_class, batch)
    fn_loss = actor_critic_loss(policy, policy.model, policy.dist_class, batch)
    assert torch.allclose(fn_loss, loss)
    fn_stats = stats(policy, batch)
    assert fn_stats.keys() == class_stats.keys()
    for key, value in class_stats.items():
        assert np.allclose(_array(fn_stats[key]), _array(value)), key
    # The advantages are those of the class's own postprocessing.
    own = policy.postprocess_trajectory(acted_trajectory(policy))
    assert np.allclose(batch[SampleBatch.ADVANTAGES].numpy(), own[SampleBatch.ADVANTAGES])


def test_torch_optimizer_is_the_class_optimizer():
    policy = _policy()
    opt = torch_optimizer(policy, policy.config)
    assert isinstance(opt, type(policy.make_optimizer()))
    assert opt.param_groups[0]["lr"] == CONFIG["lr"]
    assert {id(p) for p in opt.param_groups[0]["params"]} == {
        id(p) for p in policy.model.parameters()
    }


def test_with_updates_of_a_scaled_loss_trains():
    cls = A3CTorchPolicy.with_updates(
        name="Doubled", loss_fn=lambda p, m, d, b: actor_critic_loss(p, m, d, b) * 2
    )
    policy = _policy(cls)
    before = [p.detach().clone() for p in policy.model.parameters()]
    info = policy.learn_on_batch(policy.postprocess_trajectory(acted_trajectory(policy)))
    after = list(policy.model.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(after, before))
    assert np.isfinite(info["learner_stats"]["policy_loss"])


def test_rllib_a3c_policy_built_from_the_functions_trains():
    # RLlib 1.13's own definition of A3CTorchPolicy, from its functions.
    cls = build_policy_class(
        "A3CFromFunctions",
        "torch",
        get_default_config=lambda: A2C_DEFAULT_CONFIG,
        loss_fn=actor_critic_loss,
        stats_fn=stats,
        postprocess_fn=add_advantages,
        optimizer_fn=torch_optimizer,
        before_loss_init=setup_mixins,
        mixins=[ValueNetworkMixin, LearningRateSchedule, EntropyCoeffSchedule],
    )
    policy = _policy(cls)
    assert policy.entropy_coeff == CONFIG["entropy_coeff"] and policy.cur_lr == CONFIG["lr"]
    info = policy.learn_on_batch(policy.postprocess_trajectory(acted_trajectory(policy)))
    assert {"policy_loss", "vf_loss", "policy_entropy"} <= info["learner_stats"].keys()


def test_value_network_mixin_gives_the_value_of_one_step():
    policy = _policy()
    setup_mixins(policy, OBS, ACT, policy.config)
    obs = np.full(4, 0.5, np.float32)
    assert np.isclose(policy._value(obs=obs), policy.value(obs[None])[0], atol=1e-6)
    ValueNetworkMixin.__init__(policy, OBS, ACT, {**policy.config, "use_gae": False})
    assert policy._value(obs=obs) == 0.0


def test_vf_preds_fetches_puts_the_value_predictions_in_the_fetches():
    # RLlib 1.13's A3C acted through the template with this `extra_action_out_fn`.
    cls = A3CTorchPolicy.with_updates(name="WithFetches", extra_action_out_fn=vf_preds_fetches)
    policy = _policy(cls)
    obs = np.random.default_rng(0).uniform(-1, 1, (5, 4)).astype(np.float32)
    _, extra = policy.compute_actions_from_obs(obs)
    assert np.allclose(extra[SampleBatch.VF_PREDS], policy.value(obs), atol=1e-6)
    # Its trajectories postprocess (GAE reads the column) and train.
    info = policy.learn_on_batch(policy.postprocess_trajectory(acted_trajectory(policy)))
    assert np.isfinite(info["learner_stats"]["vf_loss"])
