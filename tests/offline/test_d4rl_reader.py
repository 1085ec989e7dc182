"""RLlib 1.13's D4RL reader (`input="d4rl.<env name>"`), with a stand-in `d4rl` module.

The real `d4rl` package is unmaintained and not installable; the stand-in does what d4rl
does: its env is registered with the old `gym` package and has `get_dataset()`, and
`qlearning_dataset(env)` turns that into transitions (next observations, time-limit steps
left out).
"""

from __future__ import annotations

import sys
import types

import gymnasium
import numpy as np
import pytest
import torch

from corral.offline import D4RLReader, IOContext
from corral.offline.d4rl_reader import convert_to_batch
from corral.offline.inputs import input_reader_for
from corral.policy.sample_batch import SampleBatch

gym = pytest.importorskip("gym", reason="D4RL's envs are old-gym envs (gym is a dev extra)")

ENV_NAME = "corraltest-medium-v0"
STEPS = 200  # the recorded steps; every 50th is a time-limit cut


def expert_action(obs: np.ndarray) -> np.ndarray:
    """The action the recorded data takes in `obs` (what behaviour cloning must learn)."""
    return np.clip(0.8 * obs[..., :1] - 0.3 * obs[..., 1:2], -1.0, 1.0).astype(np.float32)


class FakeD4RLEnv(gym.Env):
    """An old-gym env with D4RL's `get_dataset()` (float64 observations, as recorded)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self):
        return np.zeros(3, np.float32)

    def step(self, action):
        return np.zeros(3, np.float32), 0.0, True, {}

    def get_dataset(self) -> dict:
        rng = np.random.default_rng(0)
        obs = rng.uniform(-1.0, 1.0, (STEPS, 3))
        index = np.arange(STEPS)
        return {
            "observations": obs,
            "actions": expert_action(obs),
            "rewards": -np.abs(obs[:, 0]),
            "terminals": index % 7 == 6,
            "timeouts": index % 50 == 49,
        }


def qlearning_dataset(env, dataset=None, terminate_on_end=False, **kwargs) -> dict:
    """d4rl's: transitions (s, a, r, s', terminal) of `env.get_dataset()`."""
    data = env.get_dataset() if dataset is None else dataset
    keep = [
        i for i in range(len(data["rewards"]) - 1) if terminate_on_end or not data["timeouts"][i]
    ]
    nxt = [i + 1 for i in keep]
    return {
        "observations": data["observations"][keep],
        "actions": data["actions"][keep],
        "next_observations": data["observations"][nxt],
        "rewards": data["rewards"][keep],
        "terminals": data["terminals"][keep],
    }


@pytest.fixture
def fake_d4rl(monkeypatch):
    """A `d4rl` module whose import registers `ENV_NAME` with old gym, as d4rl does."""
    module = types.ModuleType("d4rl")
    module.qlearning_dataset = qlearning_dataset
    monkeypatch.setitem(sys.modules, "d4rl", module)
    from gym.envs.registration import register, registry

    register(id=ENV_NAME, entry_point=FakeD4RLEnv)
    yield module
    del registry.env_specs[ENV_NAME]


@pytest.fixture
def one_torch_thread():
    """Small nets train faster on one thread (and leave the other core to other work)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def expected_rows() -> int:
    return len(qlearning_dataset(FakeD4RLEnv())["rewards"])


def test_convert_to_batch_gives_rllibs_columns_as_float32_and_bool():
    rng = np.random.default_rng(1)
    data = {
        "observations": rng.normal(size=(5, 2)),  # float64, as d4rl's HDF5 may hold them
        "actions": rng.normal(size=(5, 1)),
        "next_observations": rng.normal(size=(5, 2)),
        "rewards": np.arange(5, dtype=np.float64),
        "terminals": np.array([0.0, 0.0, 1.0, 0.0, 1.0]),
    }
    batch = convert_to_batch(data)
    assert isinstance(batch, SampleBatch) and batch.count == 5
    for column in ("obs", "actions", "rewards", "new_obs"):
        assert batch[column].dtype == np.float32, column
    np.testing.assert_allclose(batch["obs"], data["observations"], rtol=1e-6)
    np.testing.assert_allclose(batch["new_obs"], data["next_observations"], rtol=1e-6)
    np.testing.assert_allclose(batch["actions"], data["actions"], rtol=1e-6)
    np.testing.assert_array_equal(batch["rewards"], [0, 1, 2, 3, 4])
    assert batch["dones"].dtype == np.bool_
    np.testing.assert_array_equal(batch["dones"], [False, False, True, False, True])
    np.testing.assert_array_equal(batch["terminateds"], batch["dones"])
    assert not batch["truncateds"].any()

    discrete = convert_to_batch({**data, "actions": np.array([0, 1, 2, 1, 0])})
    assert np.issubdtype(discrete["actions"].dtype, np.integer)  # integer actions stay


def test_convert_to_batch_finds_the_episodes():
    """An episode ends at a terminal row or where the next row does not continue it (the
    time-limit step `qlearning_dataset` dropped)."""
    env = FakeD4RLEnv()
    batch = convert_to_batch(qlearning_dataset(env))
    recorded = env.get_dataset()
    # Rows 0..48, 50..98, ... of the recording (each 50th step, a time-limit cut, dropped).
    kept = np.array([i for i in range(STEPS - 1) if i % 50 != 49])
    new_episode = np.ones(len(kept), bool)
    new_episode[1:] = recorded["terminals"][kept[:-1]] | (kept[1:] != kept[:-1] + 1)
    np.testing.assert_array_equal(batch["eps_id"], np.cumsum(new_episode) - 1)
    assert batch["eps_id"].dtype == np.int64
    assert batch["t"][0] == 0 and (batch["t"][new_episode] == 0).all()
    np.testing.assert_array_equal(
        batch["t"][~new_episode], batch["t"][np.flatnonzero(~new_episode) - 1] + 1
    )
    assert len(batch.split_by_episode()) == new_episode.sum()


def test_convert_to_batch_names_what_is_wrong():
    data = {
        "observations": np.zeros((3, 2)),
        "actions": np.zeros((3, 1)),
        "rewards": np.zeros(3),
        "terminals": np.zeros(3, bool),
    }
    with pytest.raises(ValueError, match="next_observations"):
        convert_to_batch(data)
    with pytest.raises(ValueError, match="differ in length"):
        convert_to_batch({**data, "next_observations": np.zeros((2, 2))})


def test_reader_returns_every_row_once_per_pass_in_a_random_order(fake_d4rl):
    reader = D4RLReader(ENV_NAME, IOContext(config={"seed": 3}))
    n = expected_rows()
    assert reader.dataset.count == n
    assert isinstance(reader.env.unwrapped, FakeD4RLEnv)  # the old-gym env d4rl made
    assert isinstance(reader.observation_space, gymnasium.spaces.Box)
    assert isinstance(reader.action_space, gymnasium.spaces.Box)

    rows = [reader.next() for _ in range(n)]
    assert all(isinstance(b, SampleBatch) and b.count == 1 for b in rows)
    firsts = np.concatenate([b["obs"] for b in rows])
    # One pass: each transition exactly once, not in the recorded order.
    assert sorted(map(tuple, firsts)) == sorted(map(tuple, reader.dataset["obs"]))
    assert not np.array_equal(firsts, reader.dataset["obs"])
    for b in rows[:10]:  # each row is a whole transition of the dataset
        i = int(np.flatnonzero((reader.dataset["obs"] == b["obs"][0]).all(axis=1))[0])
        np.testing.assert_array_equal(b["new_obs"][0], reader.dataset["new_obs"][i])
        np.testing.assert_array_equal(b["actions"][0], reader.dataset["actions"][i])
        np.testing.assert_allclose(b["actions"][0], expert_action(b["obs"][0]), atol=1e-6)
    # The next pass is shuffled afresh; the same seed and worker give the same order.
    second = np.concatenate([reader.next()["obs"] for _ in range(n)])
    assert not np.array_equal(second, firsts)
    again = D4RLReader(ENV_NAME, IOContext(config={"seed": 3}))
    np.testing.assert_array_equal(np.concatenate([again.next()["obs"] for _ in range(n)]), firsts)


def test_input_string_d4rl_env_name_builds_the_reader(fake_d4rl):
    reader = input_reader_for(f"d4rl.{ENV_NAME}", IOContext(config={"seed": 0}))
    assert isinstance(reader, D4RLReader) and reader.env_name == ENV_NAME
    with pytest.raises(ValueError, match="'nosuch-medium-v0' is not an env d4rl registers"):
        input_reader_for("d4rl.nosuch-medium-v0", IOContext())


def test_bc_trains_on_input_d4rl(fake_d4rl, one_torch_thread):
    """BC reading `input="d4rl.<env>"` learns the recorded actions."""
    from corral.agents.marwil import BCTrainer

    trainer = BCTrainer(
        config={
            "input": f"d4rl.{ENV_NAME}",
            "observation_space": gymnasium.spaces.Box(-1.0, 1.0, (3,), np.float32),
            "action_space": gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32),
            # Read 64 rows per iteration (one per next(), until the fragment is full).
            "batch_mode": "complete_episodes",
            "rollout_fragment_length": 64,
            "train_batch_size": 64,
            "lr": 1e-2,
            "model": {"fcnet_hiddens": [32]},
            "evaluation_interval": None,
            "seed": 0,
        }
    )
    try:
        probe = np.random.default_rng(9).uniform(-1.0, 1.0, (64, 3)).astype(np.float32)

        def action_error() -> float:
            policy = trainer.get_policy()
            actions = np.asarray(policy.compute_actions(probe, explore=False)[0])
            return float(np.abs(actions - expert_action(probe)).mean())

        before = action_error()
        for _ in range(2):
            result = trainer.train()
        assert result["info"]["num_env_steps_trained"] == 2 * 64
        assert trainer._counters["num_env_steps_sampled"] == 2 * 64
        for _ in range(28):
            trainer.train()
        after = action_error()
        assert after < 0.5 * before and after < 0.15, (before, after)
    finally:
        trainer.stop()


def test_without_d4rl_the_error_points_to_minari(monkeypatch):
    monkeypatch.setitem(sys.modules, "d4rl", None)  # `import d4rl` raises ImportError
    with pytest.raises(ImportError, match=r"`d4rl` package.*minari://<dataset id>"):
        D4RLReader("hopper-medium-v2")
    with pytest.raises(ImportError, match="minari://"):
        input_reader_for("d4rl.hopper-medium-v2", IOContext())
    from corral.agents.marwil import BCTrainer

    with pytest.raises(ImportError, match="`d4rl` package"):  # at trainer construction
        BCTrainer(
            config={
                "input": "d4rl.hopper-medium-v2",
                "observation_space": gymnasium.spaces.Box(-1.0, 1.0, (3,), np.float32),
                "action_space": gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32),
            }
        )


def test_cql_trains_on_input_d4rl(fake_d4rl, one_torch_thread):
    """CQL (the algorithm RLlib 1.13's D4RL examples ran) reads `input="d4rl.<env>"`."""
    from corral.agents.cql import CQLTrainer

    small = {"fcnet_hiddens": [16], "fcnet_activation": "relu"}
    trainer = CQLTrainer(
        config={
            "input": f"d4rl.{ENV_NAME}",
            "observation_space": gymnasium.spaces.Box(-1.0, 1.0, (3,), np.float32),
            "action_space": gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32),
            "Q_model": small,
            "policy_model": small,
            "num_actions": 2,
            "train_batch_size": 16,
            "evaluation_interval": None,
            "seed": 0,
        }
    )
    try:
        for _ in range(2):
            result = trainer.train()
        assert result["info"]["num_env_steps_trained"] > 0
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert np.isfinite(stats["cql_loss"])
    finally:
        trainer.stop()
