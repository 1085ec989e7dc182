"""`train()` reduces the learner metrics of built-in training steps once per iteration
(`learner_results_per_iteration`): the learner info covers all of the iteration's
updates; steps without the mark (a user's override) get each update's results."""

import math

from corral.agents.a3c import A2CTrainer
from corral.agents.dqn import DQNTrainer
from corral.execution.common import NUM_AGENT_STEPS_TRAINED

DQN_PER_STEP = {
    "num_workers": 0,
    "rollout_fragment_length": 1,
    "train_batch_size": 8,
    "training_intensity": 8,  # one gradient step per env step
    "learning_starts": 20,
    "timesteps_per_iteration": 30,
    "min_iter_time_s": 0,
    "model": {"fcnet_hiddens": [8]},
    "hiddens": [],
    "seed": 0,
}


def _trained(trainer):
    return trainer._counters[NUM_AGENT_STEPS_TRAINED]


def _info(result):
    return result["info"]["learner"]["default_policy"]


def test_dqn_learner_info_covers_every_update_of_the_iteration():
    trainer = DQNTrainer(config=DQN_PER_STEP, env="CartPole-v1")
    try:
        before = _trained(trainer)
        result = trainer.train()  # 30 env steps, updates from step 20 on
        trained = _trained(trainer) - before
        assert trained > 8  # several updates of 8 rows
        info = _info(result)
        assert info["num_agent_steps_trained"] == trained
        for name in ("mean_q", "min_q", "max_q", "cur_lr"):
            assert math.isfinite(info["learner_stats"][name]), name
        # The next iteration's info covers that iteration alone.
        before = _trained(trainer)
        info = _info(trainer.train())
        assert info["num_agent_steps_trained"] == _trained(trainer) - before == 30 * 8
    finally:
        trainer.stop()


def test_an_iteration_before_learning_starts_builds_no_learner():
    trainer = DQNTrainer(config={**DQN_PER_STEP, "learning_starts": 100}, env="CartPole-v1")
    try:
        result = trainer.train()
        assert result["info"]["learner"] == {}
        assert trainer._learner_group is None  # the end-of-iteration reduce built nothing
    finally:
        trainer.stop()


def test_training_step_called_directly_returns_its_own_update():
    trainer = DQNTrainer(config=DQN_PER_STEP, env="CartPole-v1")
    try:
        trainer.train()
        info = trainer.training_step()["default_policy"]
        assert info["num_agent_steps_trained"] == 8
    finally:
        trainer.stop()


class LastUpdateDQN(DQNTrainer):
    """A user's override: reads what the built-in step returns."""

    seen: list

    def training_step(self):
        info = super().training_step()
        self.seen.append(info["default_policy"]["num_agent_steps_trained"] if info else 0)
        return info


def test_an_unmarked_override_gets_each_updates_results():
    trainer = LastUpdateDQN(config=DQN_PER_STEP, env="CartPole-v1")
    trainer.seen = []
    try:
        trainer.train()
        info = _info(trainer.train())
        assert trainer.seen[-1] == 8
        assert info["num_agent_steps_trained"] == 8  # the last update's, as in RLlib 1.x
    finally:
        trainer.stop()


def test_a2c_learner_info_covers_every_update_of_the_iteration():
    config = {
        "num_workers": 0,
        "num_envs_per_worker": 2,
        "rollout_fragment_length": 5,
        "train_batch_size": 10,
        "timesteps_per_iteration": 50,
        "min_iter_time_s": 0,
        "model": {"fcnet_hiddens": [8]},
    }
    trainer = A2CTrainer(config=config, env="CartPole-v1")
    try:
        before = _trained(trainer)
        info = _info(trainer.train())
        assert _trained(trainer) - before == 50
        assert info["num_agent_steps_trained"] == 50
        assert math.isfinite(info["learner_stats"]["policy_loss"])
    finally:
        trainer.stop()
