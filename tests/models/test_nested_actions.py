"""`_disable_action_flattening: True`: Tuple/Dict actions stay nested in the sample
batches (`actions`, `prev_actions`), in the train batches and in what models and action
distributions get (RLlib 1.13's switch)."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from corral.agents.callbacks import DefaultCallbacks
from corral.agents.ppo import PPOTrainer
from corral.models import ModelCatalog
from corral.models.torch.torch_action_dist import TorchDistributionWrapper
from corral.models.torch.torch_modelv2 import TorchModelV2
from corral.offline.columns import batch_from_json, batch_to_json
from corral.policy.sample_batch import SampleBatch, concat_samples
from corral.policy.view_requirement import ViewRequirement
from corral.utils.spaces import flatten_action_rows, nest_action_rows

ACTIONS = gym.spaces.Dict(
    {
        "pick": gym.spaces.Discrete(3),
        "move": gym.spaces.Tuple(
            (gym.spaces.Box(-1.0, 1.0, (2,), np.float32), gym.spaces.MultiDiscrete([2, 2]))
        ),
    }
)


class PickEnv(gym.Env):
    """10 steps; reward 1 for picking the one-hot target of the observation. Checks that
    every action it gets lies in its space."""

    observation_space = gym.spaces.Box(0.0, 1.0, (3,), np.float32)

    def __init__(self, action_space=ACTIONS):
        self.action_space = action_space
        self.rng = np.random.default_rng(0)

    def _obs(self):
        self.target = int(self.rng.integers(3))
        return np.eye(3, dtype=np.float32)[self.target]

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        assert self.action_space.contains(action), action
        pick = action["pick"] if isinstance(action, dict) else action[0]
        reward = float(pick == self.target)
        self.t += 1
        return self._obs(), reward, self.t >= 10, False, {}


def _check_nested(actions, n):
    assert isinstance(actions, dict) and set(actions) == {"pick", "move"}
    assert actions["pick"].shape == (n,) and actions["pick"].dtype == np.int64
    box, bits = actions["move"]
    assert box.shape == (n, 2) and box.dtype == np.float32
    assert bits.shape == (n, 2) and np.issubdtype(bits.dtype, np.integer)


def _ppo(env_name, callbacks=None, space=ACTIONS, **config):
    return PPOTrainer(
        env=env_name(lambda ctx: PickEnv(space)),
        config={
            "num_workers": 0,
            "rollout_fragment_length": 100,
            "train_batch_size": 200,
            "sgd_minibatch_size": 50,
            "num_sgd_iter": 4,
            "lr": 3e-3,
            "seed": 0,
            "metrics_num_episodes_for_smoothing": 20,
            "model": {"fcnet_hiddens": [32]},
            "_disable_action_flattening": True,
            **({"callbacks": callbacks} if callbacks else {}),
            **config,
        },
    )


def test_nest_and_flatten_action_rows_are_inverse():
    ACTIONS.seed(0)
    rows = np.stack(
        [flatten_action_rows(ACTIONS, nest_action_rows(ACTIONS, np.zeros((1, 5))))[0]] * 2
    )
    assert rows.shape == (2, 5)
    from corral.utils.spaces import flatten_actions

    flat = np.stack([flatten_actions(ACTIONS, ACTIONS.sample()) for _ in range(6)])
    nested = nest_action_rows(ACTIONS, flat)
    _check_nested(nested, 6)
    np.testing.assert_array_equal(flatten_action_rows(ACTIONS, nested), flat)
    as_tensors = nest_action_rows(ACTIONS, torch.from_numpy(flat))
    assert as_tensors["pick"].dtype == torch.int64
    torch.testing.assert_close(flatten_action_rows(ACTIONS, as_tensors), torch.from_numpy(flat))


def test_sample_batches_keep_nested_columns():
    nested = nest_action_rows(ACTIONS, np.arange(20, dtype=np.float32).reshape(4, 5) % 2)
    batch = SampleBatch({"obs": np.zeros((4, 3)), "actions": nested})
    assert batch.count == 4
    _check_nested(batch.slice(1, 3)["actions"], 2)
    _check_nested(batch.take(np.array([3, 0, 1]))["actions"], 3)
    _check_nested(concat_samples([batch, batch])["actions"], 8)
    _check_nested(batch.copy()["actions"], 4)
    assert batch.copy()["actions"]["pick"] is not batch["actions"]["pick"]
    row = list(batch.rows())[2]["actions"]
    assert int(row["pick"]) == int(nested["pick"][2])
    tensors = batch.copy().to_device("cpu")
    assert isinstance(tensors["actions"]["move"][0], torch.Tensor)
    with pytest.raises(ValueError, match="differ in length"):
        SampleBatch({"obs": np.zeros((3, 3)), "actions": nested})
    # Files hold flat rows (the same files as without the switch).
    again = batch_from_json(batch_to_json(batch, ()), "test")
    np.testing.assert_array_equal(again["actions"], flatten_action_rows(ACTIONS, nested))


def test_ppo_keeps_nested_actions_and_learns(env_name):
    seen = {"postprocessed": [], "trained": []}

    class Record(DefaultCallbacks):
        def on_postprocess_trajectory(self, *, postprocessed_batch, **kwargs):
            seen["postprocessed"].append(postprocessed_batch)

        def on_learn_on_batch(self, *, train_batch, **kwargs):
            seen["trained"].append(train_batch)

    trainer = _ppo(env_name, Record)
    try:
        policy = trainer.get_policy()
        assert policy.config["model"]["_disable_action_flattening"] is True
        assert policy.action_space_struct == {
            "pick": ACTIONS["pick"],
            "move": (ACTIONS["move"][0], ACTIONS["move"][1]),
        }
        rewards = [trainer.train()["episode_reward_mean"] for _ in range(8)]
        sampled = trainer.workers.local_worker().sample()
    finally:
        trainer.stop()
    _check_nested(sampled["actions"], sampled.count)
    for batch in seen["postprocessed"] + seen["trained"]:
        _check_nested(batch["actions"], batch.count)
    # Random picks earn 10/3 per episode; the picks follow the target after training.
    assert rewards[-1] > 6.5, rewards


def test_nesting_changes_no_number(env_name):
    # The same seed trains to the same weights with flat and with nested actions.
    weights = []
    for nested in (False, True):
        trainer = _ppo(env_name, _disable_action_flattening=nested)
        try:
            trainer.train()
            trainer.train()
            weights.append(trainer.get_policy().get_weights())
        finally:
            trainer.stop()
    for key in weights[0]:
        np.testing.assert_array_equal(weights[0][key], weights[1][key])


class NestedCategoricals(TorchDistributionWrapper):
    """A user's distribution written for nested actions (RLlib style): samples dicts,
    and `logp` takes them."""

    logp_inputs: list = []

    def __init__(self, inputs, model=None):
        super().__init__(inputs, model)
        self.a = torch.distributions.Categorical(logits=inputs[:, :2])
        self.b = torch.distributions.Categorical(logits=inputs[:, 2:])

    def sample(self):
        self.last_sample = {"a": self.a.sample(), "b": self.b.sample()}
        return self.last_sample

    def deterministic_sample(self):
        self.last_sample = {"a": self.a.probs.argmax(-1), "b": self.b.probs.argmax(-1)}
        return self.last_sample

    def logp(self, actions):
        NestedCategoricals.logp_inputs.append(actions)
        return self.a.log_prob(actions["a"].long()) + self.b.log_prob(actions["b"].long())

    def sampled_action_logp(self):
        return self.logp(self.last_sample)

    def entropy(self):
        return self.a.entropy() + self.b.entropy()

    def kl(self, other):
        return torch.distributions.kl_divergence(
            self.a, other.a
        ) + torch.distributions.kl_divergence(self.b, other.b)

    @staticmethod
    def required_model_output_shape(action_space, model_config):
        return 5


def test_a_custom_distribution_written_for_nested_actions(env_name):
    space = gym.spaces.Dict({"a": gym.spaces.Discrete(2), "b": gym.spaces.Discrete(3)})

    class Env(PickEnv):
        def step(self, action):
            assert self.action_space.contains(action), action
            self.t += 1
            reward = float(action["b"] == self.target)
            return self._obs(), reward, self.t >= 10, False, {}

    ModelCatalog.register_custom_action_dist("nested_categoricals", NestedCategoricals)
    NestedCategoricals.logp_inputs.clear()
    trainer = PPOTrainer(
        env=env_name(lambda ctx: Env(space)),
        config={
            "num_workers": 0,
            "rollout_fragment_length": 100,
            "train_batch_size": 200,
            "sgd_minibatch_size": 50,
            "num_sgd_iter": 4,
            "lr": 3e-3,
            "seed": 0,
            "metrics_num_episodes_for_smoothing": 20,
            "model": {"fcnet_hiddens": [32], "custom_action_dist": "nested_categoricals"},
            "_disable_action_flattening": True,
        },
    )
    try:
        rewards = [trainer.train()["episode_reward_mean"] for _ in range(8)]
        sampled = trainer.workers.local_worker().sample()
    finally:
        trainer.stop()
    assert set(sampled["actions"]) == {"a", "b"}
    # The loss handed the distribution nested actions (dicts of tensors).
    trained = [a for a in NestedCategoricals.logp_inputs if torch.is_tensor(a["a"])]
    assert trained and all(a["a"].dtype == torch.int64 for a in trained)
    assert rewards[-1] > 6.5, rewards


def test_models_get_nested_previous_actions(env_name):
    space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1.0, 1.0, (2,), np.float32)))
    seen = []

    class PrevActionModel(TorchModelV2, nn.Module):
        def __init__(self, obs_space, action_space, num_outputs, model_config, name):
            TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
            nn.Module.__init__(self)
            self.view_requirements["prev_actions"] = ViewRequirement(
                data_col="actions", shift=-1, space=action_space
            )
            self.logits = nn.Linear(3 + 3 + 2, num_outputs)
            self.value = nn.Linear(3, 1)

        def forward(self, input_dict, state, seq_lens):
            pick, move = input_dict["prev_actions"]
            seen.append((pick, move))
            x = torch.cat(
                [input_dict["obs"], nn.functional.one_hot(pick.long(), 3).float(), move], -1
            )
            self._obs = input_dict["obs"]
            return self.logits(x), state

        def value_function(self):
            return self.value(self._obs).squeeze(-1)

    ModelCatalog.register_custom_model("prev_action_model", PrevActionModel)
    trainer = _ppo(env_name, space=space, model={"custom_model": "prev_action_model"})
    try:
        trainer.train()
        batch = trainer.workers.local_worker().sample()
    finally:
        trainer.stop()
    assert isinstance(batch["prev_actions"], tuple) and batch["prev_actions"][0].dtype == np.int64
    # Acting (one row at a time) and training alike.
    assert any(len(p) == 1 for p, _ in seen) and any(len(p) > 1 for p, _ in seen)
    assert all(p.dtype == torch.int64 and m.shape[1:] == (2,) for p, m in seen)


def test_lstm_reads_nested_previous_actions(env_name):
    model = {
        "use_lstm": True,
        "lstm_cell_size": 16,
        "lstm_use_prev_action": True,
        "max_seq_len": 10,
    }
    trainer = _ppo(env_name, model={**model, "fcnet_hiddens": [16]})
    try:
        result = trainer.train()
        batch = trainer.workers.local_worker().sample()
    finally:
        trainer.stop()
    _check_nested(batch["prev_actions"], batch.count)
    assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"])


def test_previous_complex_actions_need_the_switch(env_name):
    with pytest.raises(ValueError, match="_disable_action_flattening=True"):
        _ppo(
            env_name,
            _disable_action_flattening=False,
            model={"use_lstm": True, "lstm_use_prev_action": True},
        )


def test_simple_action_spaces_are_unchanged(env_name):
    trainer = PPOTrainer(
        env="CartPole-v1",
        config={
            "num_workers": 0,
            "rollout_fragment_length": 50,
            "train_batch_size": 50,
            "sgd_minibatch_size": 25,
            "num_sgd_iter": 1,
            "_disable_action_flattening": True,
        },
    )
    try:
        trainer.train()
        batch = trainer.workers.local_worker().sample()
    finally:
        trainer.stop()
    assert isinstance(batch["actions"], np.ndarray) and batch["actions"].shape == (50,)


def test_replay_buffers_keep_nested_columns():
    from corral.utils.replay_buffers import ReplayBuffer, ReservoirBuffer

    flat = np.random.default_rng(0).integers(0, 2, (8, 5)).astype(np.float32)
    nested = nest_action_rows(ACTIONS, flat)
    batch = SampleBatch({"obs": np.arange(8, dtype=np.float32), "actions": nested})
    for buffer in (ReplayBuffer(16, seed=0), ReservoirBuffer(4, seed=0)):
        buffer.add_timesteps(batch)
        sampled = buffer.sample(6)
        _check_nested(sampled["actions"], 6)
        rows = sampled["obs"].astype(np.int64)  # which rows were drawn
        np.testing.assert_array_equal(flatten_action_rows(ACTIONS, sampled["actions"]), flat[rows])
        restored = type(buffer)(16, seed=0)
        restored.set_state(buffer.get_state())
        _check_nested(restored.sample(3)["actions"], 3)


def test_offline_data_is_written_flat_and_read_nested(env_name, tmp_path):
    import json

    from corral.agents.marwil import BCTrainer

    writer = _ppo(env_name, output=str(tmp_path), rollout_fragment_length=50, train_batch_size=100)
    try:
        writer.train()
    finally:
        writer.stop()
    record = json.loads(next(tmp_path.glob("*.json")).read_text().splitlines()[0])
    assert np.asarray(record["actions"]).shape[1:] == (5,)  # the flat rows of every run
    trained = []

    class Record(DefaultCallbacks):
        def on_learn_on_batch(self, *, train_batch, **kwargs):
            trained.append(train_batch["actions"])

    reader = BCTrainer(
        env=env_name(lambda ctx: PickEnv()),
        config={
            "num_workers": 0,
            "input": str(tmp_path),
            "input_evaluation": [],
            "train_batch_size": 64,
            "callbacks": Record,
            "_disable_action_flattening": True,
        },
    )
    try:
        stats = reader.train()["info"]["learner"]["default_policy"]["learner_stats"]
    finally:
        reader.stop()
    assert np.isfinite(stats["policy_loss"])
    assert trained and all(isinstance(a, dict) for a in trained)
    _check_nested(trained[0], 64)


def test_qmix_refuses_it():
    from corral.agents.qmix import DEFAULT_CONFIG, QMixTorchPolicy, QMixTrainer

    with pytest.raises(NotImplementedError, match="_disable_action_flattening"):
        QMixTrainer(config={"_disable_action_flattening": True})
    space = gym.spaces.Tuple([gym.spaces.Discrete(2)] * 2)
    obs = gym.spaces.Tuple([gym.spaces.Box(-1.0, 1.0, (3,), np.float32)] * 2)
    config = {**DEFAULT_CONFIG, "_disable_action_flattening": True}
    with pytest.raises(NotImplementedError, match="QMixTorchPolicy reads its"):
        QMixTorchPolicy(obs, space, config)
