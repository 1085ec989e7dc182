"""RLlib 1.13's function forms of SlateQ's torch policy (`build_slateq_losses`,
`build_slateq_stats`, `optimizer_fn`, `build_slateq_model_and_distribution`,
`setup_late_mixins`, `setup_early`, `action_distribution_fn`,
`postprocess_fn_add_next_actions_for_sarsa`)."""

import copy

import numpy as np
import pytest
import torch

from corral.agents.slateq import DEFAULT_CONFIG, SlateQTorchPolicy
from corral.agents.slateq.slateq_torch_model import SlateQTorchModel
from corral.agents.slateq.slateq_torch_policy import (
    action_distribution_fn,
    build_slateq_losses,
    build_slateq_model_and_distribution,
    build_slateq_stats,
    optimizer_fn,
    postprocess_fn_add_next_actions_for_sarsa,
    setup_early,
    setup_late_mixins,
)
from corral.env.recommender_system import InterestEvolutionEnv
from corral.policy.sample_batch import SampleBatch

ENV_CONFIG = {"num_candidates": 4, "slate_size": 2, "num_topics": 3}


def _policy(cls=SlateQTorchPolicy):
    env = InterestEvolutionEnv(ENV_CONFIG)
    config = copy.deepcopy(DEFAULT_CONFIG)
    config["fcnet_hiddens_per_candidate"] = [8]
    torch.manual_seed(0)
    return cls(env.observation_space, env.action_space, config), env


def _transitions(env, policy, n=64, seed=0):
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    rows = {k: [] for k in ("obs", "new_obs", "actions", "rewards", "terminateds")}
    for _ in range(n):
        slate = rng.choice(env.num_candidates, env.slate_size, replace=False)
        next_obs, reward, terminated, _, _ = env.step(slate)
        rows["obs"].append(policy.preprocessor.transform(obs))
        rows["new_obs"].append(policy.preprocessor.transform(next_obs))
        rows["actions"].append(slate)
        rows["rewards"].append(reward)
        rows["terminateds"].append(terminated)
        obs = env.reset()[0] if terminated else next_obs
    return SampleBatch({k: np.asarray(v) for k, v in rows.items()})


def _weights(module):
    return [p.detach().clone() for p in module.parameters()]


def _changed(before, module):
    return any(not torch.equal(a, b) for a, b in zip(before, module.parameters()))


def test_build_slateq_losses_are_the_class_losses_and_stats_its_stats():
    policy, env = _policy()
    tensors = policy.replay_tensors(_transitions(env, policy))
    q_loss, choice_loss, _, stats = policy.losses(policy.model, tensors)
    fn_choice, fn_q = build_slateq_losses(policy, policy.model, None, tensors)
    assert torch.allclose(fn_choice, choice_loss) and torch.allclose(fn_q, q_loss)
    fn_stats = build_slateq_stats(policy, tensors)
    assert fn_stats.keys() == stats.keys()
    assert torch.allclose(fn_stats["mean_td_error"], stats["mean_td_error"])


def test_with_updates_of_scaled_losses_trains_both_networks():
    def doubled(policy, model, dist_class, batch):
        choice, q = build_slateq_losses(policy, model, dist_class, batch)
        return choice * 2, q * 2

    policy, env = _policy(
        SlateQTorchPolicy.with_updates(name="Doubled", loss_fn=doubled, stats_fn=build_slateq_stats)
    )
    choice, q = _weights(policy.model.choice_model), _weights(policy.model.q_model)
    info = policy.learn_on_batch(_transitions(env, policy))
    assert _changed(choice, policy.model.choice_model) and _changed(q, policy.model.q_model)
    assert np.isfinite(info["learner_stats"]["q_loss"])


def test_each_loss_trains_its_own_network_only():
    # A choice loss reaching the item network's weights must not move them.
    def choice_only(policy, model, dist_class, batch):
        choice, q = build_slateq_losses(policy, model, dist_class, batch)
        leak = sum(p.sum() for p in model.q_model.parameters())
        return choice + leak, q * 0.0

    policy, env = _policy(SlateQTorchPolicy.with_updates(name="ChoiceOnly", loss_fn=choice_only))
    choice, q = _weights(policy.model.choice_model), _weights(policy.model.q_model)
    policy.learn_on_batch(_transitions(env, policy))
    assert _changed(choice, policy.model.choice_model)
    assert not _changed(q, policy.model.q_model)


def test_a_loss_function_not_returning_two_losses_is_refused():
    policy, env = _policy(
        SlateQTorchPolicy.with_updates(
            name="One", loss_fn=lambda p, m, d, b: sum(build_slateq_losses(p, m, d, b))
        )
    )
    with pytest.raises(ValueError, match=r"\(choice_loss, q_loss\)"):
        policy.learn_on_batch(_transitions(env, policy))


def test_optimizers_model_and_target():
    policy, _ = _policy()
    opts = optimizer_fn(policy, policy.config)
    assert isinstance(opts["choice_model"], torch.optim.Adam)
    assert isinstance(opts["q_model"], torch.optim.RMSprop)
    model, dist_class = build_slateq_model_and_distribution(
        policy, policy.observation_space, policy.action_space, policy.config
    )
    assert isinstance(model, SlateQTorchModel) and dist_class is policy.dist_class
    assert policy.target_model is not model
    policy.model = model
    setup_late_mixins(policy, policy.observation_space, policy.action_space, policy.config)
    for p, t in zip(policy.model.parameters(), policy.target_model.parameters()):
        assert torch.equal(p, t)


def test_action_distribution_fn_acts_as_the_class():
    calls = []

    def counted(*args, **kwargs):
        calls.append(kwargs["is_training"])
        return action_distribution_fn(*args, **kwargs)

    plain, env = _policy()
    hooked, _ = _policy(SlateQTorchPolicy.with_updates(action_distribution_fn=counted))
    hooked.set_weights(plain.get_weights())
    obs = _transitions(env, plain, n=6)[SampleBatch.OBS]
    actions, extra = hooked.compute_actions_from_obs(obs, explore=False)
    expected, expected_extra = plain.compute_actions_from_obs(obs, explore=False)
    assert calls == [False]
    np.testing.assert_array_equal(actions, expected)
    np.testing.assert_allclose(
        extra[SampleBatch.ACTION_DIST_INPUTS],
        expected_extra[SampleBatch.ACTION_DIST_INPUTS],
        rtol=1e-6,
    )


def test_setup_early_gives_every_slate_in_the_model_s_order():
    policy, env = _policy()

    class Plain:
        pass

    bare = Plain()
    setup_early(bare, env.observation_space, env.action_space, {})
    assert torch.equal(bare.slates, policy.slates)  # 4 * 3 ordered slates of 2
    assert bare.slates.shape == (12, 2)
    assert torch.equal(bare.slates_indices, policy.slates.reshape(1, -1))
    # On SlateQTorchPolicy (whose `slates` are its model's) only the indices are set.
    setup_early(policy, env.observation_space, env.action_space, policy.config)
    assert policy.slates_indices.shape == (1, 24)


def test_postprocess_fn_add_next_actions_for_sarsa():
    policy, env = _policy()
    batch = _transitions(env, policy, n=5)
    batch[SampleBatch.TRUNCATEDS] = np.zeros(5, bool)
    batch[SampleBatch.TERMINATEDS] = np.zeros(5, bool)
    assert "next_actions" not in postprocess_fn_add_next_actions_for_sarsa(policy, batch)
    policy.config["slateq_strategy"] = "SARSA"
    with pytest.raises(RuntimeError, match="complete episode"):
        postprocess_fn_add_next_actions_for_sarsa(policy, batch)
    batch[SampleBatch.TERMINATEDS][-1] = True
    out = postprocess_fn_add_next_actions_for_sarsa(policy, batch)
    np.testing.assert_array_equal(out["next_actions"][:-1], batch[SampleBatch.ACTIONS][1:])
