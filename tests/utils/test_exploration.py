"""Exploration strategies: schedules, greedy/random choices, state, the factory."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.models.torch.torch_action_dist import TorchCategorical, TorchDeterministic
from corral.utils.exploration import (
    EpsilonGreedy,
    GaussianNoise,
    OrnsteinUhlenbeckNoise,
    PerWorkerEpsilonGreedy,
    Random,
    SoftQ,
    StochasticSampling,
    make_exploration,
)
from corral.utils.schedules import PiecewiseSchedule

DISCRETE = gym.spaces.Discrete(4)
BOX = gym.spaces.Box(-2.0, 2.0, (3,), np.float32)


def q_dist(q):
    return TorchCategorical(torch.as_tensor(q, dtype=torch.float32))


def test_epsilon_schedule_values():
    exp = EpsilonGreedy(
        DISCRETE,
        initial_epsilon=1.0,
        final_epsilon=0.1,
        epsilon_timesteps=1000,
        warmup_timesteps=100,
    )
    assert exp.epsilon(0) == 1.0
    assert exp.epsilon(100) == 1.0
    assert exp.epsilon(600) == pytest.approx(0.55)
    assert exp.epsilon(1100) == pytest.approx(0.1)
    assert exp.epsilon(10**7) == pytest.approx(0.1)
    custom = EpsilonGreedy(DISCRETE, epsilon_schedule=PiecewiseSchedule([[0, 0.5], [10, 0.0]]))
    assert custom.epsilon(5) == pytest.approx(0.25)


def test_epsilon_greedy_actions():
    torch.manual_seed(0)
    q = np.tile([0.0, 3.0, 1.0, -np.inf], (4000, 1))
    greedy = EpsilonGreedy(DISCRETE, initial_epsilon=0.0, final_epsilon=0.0)
    actions, logp = greedy.get_exploration_action(q_dist(q), timestep=0, explore=True)
    assert (actions == 1).all() and (logp == 0).all()
    uniform = EpsilonGreedy(DISCRETE, initial_epsilon=1.0, final_epsilon=1.0)
    actions, _ = uniform.get_exploration_action(q_dist(q), timestep=0, explore=True)
    counts = np.bincount(actions.numpy(), minlength=4)
    assert counts[3] == 0  # the masked action is never drawn
    assert all(1150 < c < 1520 for c in counts[:3])
    actions, _ = uniform.get_exploration_action(q_dist(q), timestep=0, explore=False)
    assert (actions == 1).all()


@pytest.mark.parametrize("epsilon", [0.0, 0.05, 0.5, 1.0])
def test_epsilon_greedy_draws_the_same_random_stream_on_every_step(epsilon):
    # Both draws (the noise over actions, then the explore mask) happen on every step,
    # whether or not a row explores: the actions are those of drawing both and picking
    # per row, and the generator ends where it would.
    q = torch.tensor([[0.0, 3.0, 1.0, -np.inf], [2.0, np.nan, 0.5, 1.0], [1.0, 0.0, 0.0, 0.0]])
    exp = EpsilonGreedy(DISCRETE, initial_epsilon=epsilon, final_epsilon=epsilon)
    torch.manual_seed(3)
    got = [exp.get_exploration_action(q_dist(q), timestep=0)[0] for _ in range(300)]
    after = torch.rand(1)
    torch.manual_seed(3)
    greedy = q.argmax(-1)
    for actions in got:
        noise = torch.rand(q.shape).masked_fill(~torch.isfinite(q), -1.0)
        explore = torch.rand(len(q)) < epsilon
        assert torch.equal(actions, torch.where(explore, noise.argmax(-1), greedy))
    assert torch.equal(torch.rand(1), after)


@pytest.mark.parametrize("rows", [1, 7, 300])
def test_epsilon_greedy_picks_what_its_definition_in_torch_picks(rows):
    # The definition, op by op in torch: n x A uniform noise, then one coin per row; a
    # row whose coin is under epsilon takes the noise's argmax among its finite Q-values.
    gen = np.random.default_rng(rows)
    q = gen.normal(size=(rows, 4)).astype(np.float32)
    q[gen.random(size=(rows, 4)) < 0.3] = -np.inf
    q[:, 2] = np.where(np.isfinite(q).any(-1), q[:, 2], 0.0)  # every row allows one action
    exp = EpsilonGreedy(DISCRETE, initial_epsilon=0.5, final_epsilon=0.5)
    for seed in range(5):
        torch.manual_seed(seed)
        actions, logp = exp.get_exploration_action(q_dist(q), timestep=0, explore=True)
        torch.manual_seed(seed)
        q_t = torch.as_tensor(q)
        noise = torch.rand(q_t.shape).masked_fill(~torch.isfinite(q_t), -1.0)
        coins = torch.rand(rows)
        expected = torch.where(coins < 0.5, noise.argmax(-1), q_t.argmax(-1))
        assert actions.dtype == torch.int64 and torch.equal(actions, expected)
        assert logp.dtype == torch.float32 and (logp == 0).all()
        assert np.isfinite(q[np.arange(rows), actions.numpy()]).all()


def test_per_worker_epsilons_follow_apex():
    def eps(worker_index, num_workers):
        exp = PerWorkerEpsilonGreedy(DISCRETE, worker_index=worker_index, num_workers=num_workers)
        return exp.epsilon(10**6)

    assert eps(1, 8) == pytest.approx(0.4)
    assert eps(8, 8) == pytest.approx(0.4**8)
    assert eps(4, 8) == pytest.approx(0.4 ** (1 + 7 * 3 / 7))
    assert eps(0, 8) == 0.0  # the driver's worker does not sample
    assert eps(0, 0) == pytest.approx(0.05)  # no remote workers: the annealed schedule


def test_gaussian_noise_random_phase_then_scaled_noise():
    torch.manual_seed(0)
    exp = GaussianNoise(
        BOX,
        random_timesteps=10,
        stddev=0.5,
        initial_scale=1.0,
        final_scale=0.0,
        scale_timesteps=100,
    )
    dist = TorchDeterministic(torch.full((2000, 3), 1.9))
    actions, _ = exp.get_exploration_action(dist, timestep=0)
    assert actions.min() >= -2.0 and actions.max() <= 2.0 and actions.std() > 0.8
    actions, _ = exp.get_exploration_action(dist, timestep=50)
    assert actions.max() <= 2.0  # clipped to the bounds
    noise = exp.scale(50) * 0.5
    assert float((actions < 1.9).float().mean()) == pytest.approx(0.5, abs=0.05)
    assert noise == pytest.approx(0.25)
    actions, _ = exp.get_exploration_action(dist, timestep=200)
    assert torch.allclose(actions, torch.full((2000, 3), 1.9))
    actions, _ = exp.get_exploration_action(dist, timestep=0, explore=False)
    assert torch.allclose(actions, torch.full((2000, 3), 1.9))


def test_ou_noise_is_correlated_and_its_state_restores():
    torch.manual_seed(0)
    exp = OrnsteinUhlenbeckNoise(BOX, random_timesteps=0, final_scale=1.0)
    dist = TorchDeterministic(torch.zeros(1, 3))
    for t in range(20):
        exp.get_exploration_action(dist, timestep=t)
    state = exp.get_state()
    other = OrnsteinUhlenbeckNoise(BOX, random_timesteps=0, final_scale=1.0)
    other.set_state(state)
    assert torch.equal(other.ou_state, exp.ou_state) and other.last_timestep == 19
    exp.on_episode_start()
    assert not exp.ou_state.any()


def test_random_softq_and_stochastic_sampling():
    torch.manual_seed(0)
    q = torch.tensor([[0.0, 0.0, 10.0, 0.0]]).repeat(2000, 1)
    rand_actions, _ = Random(DISCRETE).get_exploration_action(q_dist(q))
    assert len(set(rand_actions.tolist())) == 4
    hot, _ = SoftQ(DISCRETE, temperature=100.0).get_exploration_action(q_dist(q))
    cold, _ = SoftQ(DISCRETE, temperature=0.1).get_exploration_action(q_dist(q))
    assert (cold == 2).all() and len(set(hot.tolist())) == 4
    actions, logp = StochasticSampling(DISCRETE).get_exploration_action(q_dist(q))
    assert torch.allclose(logp, torch.log_softmax(q, -1)[torch.arange(2000), actions])


def test_make_exploration_resolves_names_paths_and_classes():
    kw = dict(action_space=DISCRETE, policy_config={}, model=None)
    assert type(make_exploration({"type": "SoftQ"}, **kw)) is SoftQ
    dotted = "corral.utils.exploration.epsilon_greedy.EpsilonGreedy"
    assert type(make_exploration({"type": dotted}, **kw)) is EpsilonGreedy
    assert type(make_exploration({"type": Random}, **kw)) is Random
    assert type(make_exploration(None, **kw)) is StochasticSampling
    with pytest.raises(ValueError, match="Unknown exploration type"):
        make_exploration({"type": "Curiousity"}, **kw)
    with pytest.raises(TypeError, match="does not fit EpsilonGreedy"):
        make_exploration({"type": "EpsilonGreedy", "bogus": 1}, **kw)


@pytest.mark.parametrize(
    ("config", "space", "error", "message"),
    [
        (
            {"type": "EpsilonGreedy", "final_epsilon": 2.0},
            DISCRETE,
            ValueError,
            r"final_epsilon` must be a number in \[0, 1\], got 2.0",
        ),
        (
            {"type": "EpsilonGreedy", "initial_epsilon": -0.5},
            DISCRETE,
            ValueError,
            "initial_epsilon",
        ),
        (
            {"type": "EpsilonGreedy", "epsilon_timesteps": 1.5},
            DISCRETE,
            ValueError,
            "epsilon_timesteps` must be an int >= 0",
        ),
        ({"type": "EpsilonGreedy", "epsilon_schedule": 5}, DISCRETE, TypeError, "epsilon_schedule"),
        (
            {"type": "PerWorkerEpsilonGreedy", "final_epsilon": "a"},
            DISCRETE,
            TypeError,
            "final_epsilon",
        ),
        (
            {"type": "GaussianNoise", "stddev": -1.0},
            BOX,
            ValueError,
            "stddev` must be a number >= 0",
        ),
        ({"type": "OrnsteinUhlenbeckNoise", "ou_sigma": -0.2}, BOX, ValueError, "ou_sigma"),
        (
            {"type": "OrnsteinUhlenbeckNoise", "random_timesteps": -3},
            BOX,
            ValueError,
            "random_timesteps",
        ),
        (
            {"type": "StochasticSampling", "random_timesteps": -1},
            DISCRETE,
            ValueError,
            "random_timesteps",
        ),
    ],
)
def test_make_exploration_checks_each_argument(config, space, error, message):
    # A bad value fails when the policy is built, naming `exploration_config.<key>`, the
    # value and what is expected (it used to act with it: epsilon 2.0 always explored).
    kw = dict(action_space=space, policy_config={}, model=None)
    with pytest.raises(error, match=rf"`exploration_config\.{message}"):
        make_exploration(config, **kw)
    # Each class's table has its bases' keys too; good values pass.
    assert "stddev" in OrnsteinUhlenbeckNoise.config_specs()
    make_exploration(
        {"type": "EpsilonGreedy", "epsilon_timesteps": 1e4}, **kw | {"action_space": DISCRETE}
    )


def test_policy_checkpoints_exploration_state():
    from corral.agents.dqn import DEFAULT_CONFIG, DQNTorchPolicy

    policy = DQNTorchPolicy(gym.spaces.Box(-1, 1, (2,)), DISCRETE, DEFAULT_CONFIG)
    policy.compute_actions_from_obs(np.zeros((3, 2), np.float32), explore=True)
    policy.global_timestep = 5000
    policy.compute_actions_from_obs(np.zeros((3, 2), np.float32), explore=True)
    state = policy.get_state()
    assert state["exploration"]["last_timestep"] == 5000
    fresh = DQNTorchPolicy(gym.spaces.Box(-1, 1, (2,)), DISCRETE, DEFAULT_CONFIG)
    fresh.set_state(state)
    assert fresh.exploration.last_timestep == 5000
    assert fresh.exploration.epsilon() == pytest.approx(policy.exploration.epsilon())


def test_sampler_restarts_ou_noise_at_each_episode_start():
    from corral.agents.ddpg import DDPGTrainer

    config = {
        "num_workers": 0,
        "rollout_fragment_length": 10,
        "learning_starts": 10_000,
        "horizon": 5,
        "actor_hiddens": [8],
        "critic_hiddens": [8],
    }
    trainer = DDPGTrainer(config=config, env="Pendulum-v1")
    try:
        exploration = trainer.get_policy().exploration
        starts = []
        original = exploration.on_episode_start

        def spy(**kwargs):
            starts.append(kwargs["episode"].episode_id)
            original(**kwargs)

        exploration.on_episode_start = spy
        trainer.workers.local_worker().sample()
        assert len(starts) == 2  # 10 steps with a horizon of 5: two new episodes
        exploration.ou_state = exploration.ou_state + 1.0
        original(policy=trainer.get_policy())
        assert bool((exploration.ou_state == 0).all())
    finally:
        trainer.stop()
