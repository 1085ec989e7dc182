"""SlateQ: the choice models and the slate values against brute-force enumeration, the
greedy slate, the losses, config checks, and the trainer end to end (tiny settings)."""

import copy
import itertools

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.registry import get_trainer_class
from corral.agents.slateq import DEFAULT_CONFIG, SlateQTorchPolicy, SlateQTrainer
from corral.agents.slateq.slateq import calculate_round_robin_weights
from corral.agents.slateq.slateq_torch_model import score_documents
from corral.agents.slateq.slateq_torch_policy import get_per_slate_q_values, validate_spaces
from corral.env.recommender_system import ENV_NAME, InterestEvolutionEnv
from corral.policy.sample_batch import SampleBatch
from corral.utils.error import UnsupportedSpaceException

ENV_CONFIG = {"num_candidates": 5, "slate_size": 2, "num_topics": 4}


def _policy(**overrides):
    env = InterestEvolutionEnv(ENV_CONFIG)
    config = copy.deepcopy(DEFAULT_CONFIG)
    config.update({"fcnet_hiddens_per_candidate": [16, 8], "gamma": 0.9, **overrides})
    return SlateQTorchPolicy(env.observation_space, env.action_space, config), env


def _random_obs(env, n, seed=0):
    """Observations with random (not one-hot) document features and interests."""
    rng = np.random.default_rng(seed)
    observations = []
    for _ in range(n):
        obs, _ = env.reset(seed=int(rng.integers(1 << 30)))
        obs["user"] = rng.uniform(-1, 1, env.num_topics).astype(np.float32)
        obs["doc"] = {k: rng.uniform(0, 1, env.num_topics).astype(np.float32) for k in obs["doc"]}
        observations.append(obs)
    return observations


def _choice_probs(kind, model, user, docs):
    """P(slot k | slate) and P(no click) by the choice model's formula, for one slate."""
    affinity = docs @ user
    if kind == "learned":
        beta = model.choice_model.beta.item()
        logits = np.append(beta * affinity, model.choice_model.score_no_click.item())
        weights = np.exp(logits - logits.max())
    else:  # RecSim's proportional model, RLlib 1.13's scores: <u, d> + 1, "no click" 2.
        weights = np.append(np.maximum(affinity + 1.0, 0.0), 2.0)
    return weights / weights.sum()


def _brute_force_values(kind, model, user, docs, q):
    """{slate: sum_k P(slot k) q(slate_k)} over every slate of distinct candidates."""
    values = {}
    for slate in itertools.permutations(range(len(docs)), 2):
        probs = _choice_probs(kind, model, user, docs[list(slate)])
        values[slate] = float(np.dot(probs[:-1], q[list(slate)]))
    return values


@pytest.fixture(params=["proportional", "learned"])
def kind(request):
    return request.param


def test_user_choice_model_is_a_conditional_logit():
    policy, _ = _policy()
    choice = policy.model.choice_model
    with torch.no_grad():
        choice.beta.fill_(2.0)
        choice.score_no_click.fill_(0.5)
    user = torch.tensor([[1.0, -0.5]])
    docs = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]])
    probs = torch.softmax(choice(user, docs), -1)[0].detach().numpy()
    logits = np.array([2.0 * 1.0, 2.0 * -0.5, 2.0 * 0.25, 0.5])
    np.testing.assert_allclose(probs, np.exp(logits) / np.exp(logits).sum(), rtol=1e-6)


def test_score_documents_is_recsims_proportional_model():
    user = torch.tensor([[0.5, -1.0], [1.0, 1.0]])
    docs = [torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([[0.0, 1.0], [1.0, 0.0]])]
    scores, no_click = score_documents(user, docs)
    np.testing.assert_allclose(scores.numpy(), [[1.5, 0.0], [2.0, 2.0]])
    np.testing.assert_allclose(no_click.numpy(), [2.0, 2.0])
    logits, no_click_p = score_documents(user, docs, multinomial_logits=True)
    full = torch.softmax(torch.tensor([[0.5, -1.0, 1.0], [1.0, 1.0, 1.0]]), -1)
    np.testing.assert_allclose(logits.numpy(), full[:, :2].numpy(), rtol=1e-6)
    np.testing.assert_allclose(no_click_p.numpy(), full[:, 2].numpy(), rtol=1e-6)


def test_slate_values_match_brute_force_enumeration(kind):
    policy, env = _policy(choice_model=kind)
    model = policy.model
    with torch.no_grad():  # a choice model away from its all-zero start
        model.choice_model.beta.fill_(1.7)
        model.choice_model.score_no_click.fill_(0.3)
    flat = torch.from_numpy(policy.preprocessor.transform_batch(_random_obs(env, 6)))
    obs = model.unpack(flat)
    with torch.no_grad():
        q = model.get_q_values(obs.user, obs.docs)
        slate_values = model.slate_q_values(obs.user, obs.docs)
        scores, no_click = model.choice_scores(obs.user, obs.docs)
        assert torch.allclose(
            get_per_slate_q_values(policy, no_click, scores, q), slate_values, atol=1e-6
        )
    slates = [tuple(s) for s in policy.slates.tolist()]
    for row in range(len(flat)):
        expected = _brute_force_values(
            kind, model, obs.user[row].numpy(), obs.docs[row].numpy(), q[row].numpy()
        )
        assert set(slates) == set(expected)
        got = dict(zip(slates, slate_values[row].tolist()))
        for slate, value in expected.items():
            assert got[slate] == pytest.approx(value, rel=1e-5, abs=1e-6)


def test_greedy_slate_is_the_brute_force_best(kind):
    policy, env = _policy(choice_model=kind)
    model = policy.model
    with torch.no_grad():
        model.choice_model.beta.fill_(-0.8)
    observations = _random_obs(env, 20, seed=1)
    actions, _, extra = policy.compute_actions(observations, explore=False)
    flat = torch.from_numpy(policy.preprocessor.transform_batch(observations))
    obs = model.unpack(flat)
    with torch.no_grad():
        q = model.get_q_values(obs.user, obs.docs).numpy()
    for row, action in enumerate(actions):
        values = _brute_force_values(
            kind, model, obs.user[row].numpy(), obs.docs[row].numpy(), q[row]
        )
        assert len(set(action)) == len(action)
        assert values[tuple(action)] == pytest.approx(max(values.values()), abs=1e-5)
        assert extra[SampleBatch.VF_PREDS][row] == pytest.approx(max(values.values()), abs=1e-5)


def _transitions(env, policy, n, seed=0):
    """`n` transitions of random slates, as a train batch of the policy's columns."""
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


def test_q_loss_learns_the_clicked_item_towards_the_best_next_slate():
    policy, env = _policy()
    batch = _transitions(env, policy, 200)
    with torch.no_grad():  # a target network different from the online one
        for p in policy.target_model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    tensors = policy.replay_tensors(batch)
    q_loss, _, td_error, stats = policy.losses(policy.model, tensors)
    model, target_model = policy.model, policy.target_model
    obs, next_obs = model.unpack(tensors["obs"]), model.unpack(tensors["new_obs"])
    clicks = next_obs.clicks.numpy()
    with torch.no_grad():
        q = model.get_q_values(obs.user, obs.docs).numpy()
        q_next = target_model.get_q_values(next_obs.user, next_obs.docs).numpy()
    expected = np.zeros(len(batch))
    for row in range(len(batch)):
        if clicks[row].sum() == 0:
            continue
        clicked_doc = batch["actions"][row][clicks[row].argmax()]
        best_next = max(
            _brute_force_values(
                "proportional",
                model,
                next_obs.user[row].numpy(),
                next_obs.docs[row].numpy(),
                q_next[row],
            ).values()
        )
        target = batch["rewards"][row] + 0.9 * (1 - batch["terminateds"][row]) * best_next
        expected[row] = q[row, clicked_doc] - target
    assert (expected != 0).sum() > 50 and (expected == 0).sum() > 10
    np.testing.assert_allclose(td_error.numpy(), expected, rtol=1e-4, atol=1e-5)
    assert q_loss.item() == pytest.approx(np.mean(expected**2), rel=1e-4)
    np.testing.assert_allclose(policy.compute_td_error(batch), expected, rtol=1e-4, atol=1e-5)
    assert 0 < stats["clicked_fraction"] < 1


def test_choice_loss_fits_the_envs_click_model():
    # The env's clicks follow a conditional logit with beta 3 and a no-click logit of 1
    # on one-hot documents, exactly the family `UserChoiceModel` fits.
    policy, env = _policy()
    batch = _transitions(env, policy, 1500, seed=1)
    model, choice = policy.model, policy.model.choice_model
    with torch.no_grad():
        choice.beta.fill_(0.7)
        choice.score_no_click.fill_(-0.2)
    tensors = policy.replay_tensors(batch)
    _, choice_loss, _, _ = policy.losses(model, tensors)
    # The loss is the cross-entropy of the observed choice: the clicked slot of the
    # response in the next observation, or "no click" (class `slate_size`).
    obs, next_obs = model.unpack(tensors["obs"]), model.unpack(tensors["new_obs"])
    actions = tensors["actions"].long()
    shown = torch.stack([obs.docs[np.arange(len(batch)), actions[:, k]] for k in range(2)], 1)
    clicks = next_obs.clicks.numpy()
    labels = torch.from_numpy(np.where(clicks.sum(1) > 0, clicks.argmax(1), 2))
    logits = torch.stack(
        [0.7 * (shown[:, k] * obs.user).sum(-1) for k in range(2)]
        + [torch.full((len(batch),), -0.2)],
        1,
    )
    expected = torch.nn.functional.cross_entropy(logits, labels)
    assert choice_loss.item() == pytest.approx(expected.item(), rel=1e-5)
    # Minimising it recovers the env's parameters.
    optimizer = torch.optim.Adam(choice.parameters(), lr=0.1)
    for _ in range(200):
        loss = torch.nn.functional.cross_entropy(choice(obs.user, shown), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert choice.beta.item() == pytest.approx(env.choice_beta, abs=0.4)
    assert choice.score_no_click.item() == pytest.approx(env.no_click_score, abs=0.3)


def test_spaces_are_checked_and_refusals_name_the_space():
    env = InterestEvolutionEnv(ENV_CONFIG)
    assert validate_spaces(env.observation_space, env.action_space) == (5, 2)
    box = gym.spaces.Box(-1, 1, (4,))
    with pytest.raises(UnsupportedSpaceException, match="RecSim") as err:
        validate_spaces(box, env.action_space)
    assert str(box) in str(err.value)
    for action_space in (gym.spaces.MultiDiscrete([5, 4]), gym.spaces.MultiDiscrete([4, 4])):
        with pytest.raises(UnsupportedSpaceException) as err:
            validate_spaces(env.observation_space, action_space)
        assert str(action_space) in str(err.value)


def test_round_robin_weights():
    config = {"training_intensity": None, "train_batch_size": 32, "rollout_fragment_length": 4}
    assert calculate_round_robin_weights(config) == [1, 1]
    assert calculate_round_robin_weights({**config, "training_intensity": 16}) == [1, 2.0]


TINY = {
    "env": ENV_NAME,
    "env_config": ENV_CONFIG,
    "seed": 0,
    "fcnet_hiddens_per_candidate": [16],
    "learning_starts": 64,
    "target_network_update_freq": 64,
    "min_sample_timesteps_per_reporting": 160,
    "min_time_s_per_reporting": 0,
}


@pytest.mark.parametrize(
    ("bad", "error", "match"),
    [
        ({"choice_model": "logit"}, ValueError, "choice_model"),
        ({"choice_model": "learned"}, ValueError, "prioritized"),
        ({"n_step": 3}, NotImplementedError, "n_step"),
        ({"fcnet_hiddens_per_candidate": [0]}, ValueError, "fcnet_hiddens_per_candidate"),
        ({"rmsprop_epsilon": 0.0}, ValueError, "rmsprop_epsilon"),
    ],
)
def test_bad_config_values_are_refused_at_construction(bad, error, match):
    with pytest.raises(error, match=match):
        SlateQTrainer(config={**TINY, **bad})


def test_trainer_trains_saves_and_restores(tmp_path):
    assert get_trainer_class("SlateQ") is SlateQTrainer
    trainer = SlateQTrainer(config=TINY)
    try:
        assert trainer.local_replay_buffer.prioritized  # RLlib 1.13's default
        result = trainer.train()
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert {"q_loss", "choice_loss", "q_values", "mean_td_error"} <= set(stats)
        assert all(np.isfinite(stats[k]) for k in ("q_loss", "choice_loss"))
        obs, _ = InterestEvolutionEnv(ENV_CONFIG).reset(seed=0)
        action = trainer.compute_single_action(obs, explore=False)
        assert trainer.get_policy().action_space.contains(np.asarray(action))
        assert len(set(action)) == 2
        path = trainer.save(str(tmp_path))
        state = trainer.get_policy().get_state()
    finally:
        trainer.stop()
    restored = SlateQTrainer(config=TINY)
    try:
        restored.restore(path)
        again = restored.get_policy().get_state()["weights"]
        assert set(again) == set(state["weights"])
        assert any(k.startswith("_target.") for k in again)
        for k, v in state["weights"].items():
            np.testing.assert_array_equal(again[k], v)
        assert restored.compute_single_action(obs, explore=False).tolist() == list(action)
    finally:
        restored.stop()


def test_same_seed_same_results_with_soft_q_and_the_learned_choice_model():
    config = {
        **TINY,
        "choice_model": "learned",
        "replay_buffer_config": {"type": "MultiAgentReplayBuffer"},
        "exploration_config": {"type": "SlateSoftQ", "temperature": 0.5},
    }

    def run():
        trainer = SlateQTrainer(config=config)
        try:
            rewards = [trainer.train()["hist_stats"]["episode_reward"] for _ in range(2)]
            return rewards, trainer.get_policy().get_weights()
        finally:
            trainer.stop()

    (r1, w1), (r2, w2) = run(), run()
    assert r1 == r2
    for k in w1:
        np.testing.assert_array_equal(w1[k], w2[k])


def test_remote_worker_computes_the_initial_priorities():
    # A worker process builds the env by its registered name and prioritizes its samples.
    trainer = SlateQTrainer(config={**TINY, "num_workers": 1, "worker_side_prioritization": True})
    try:
        result = trainer.train()
        assert result["num_healthy_workers"] == 1
        assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["q_loss"])
    finally:
        trainer.stop()
