"""RLlib 1.13's function-style PG pieces: `pg_torch_loss` / `pg_loss_stats` plugged into
`PGTorchPolicy.with_updates`, and DDPG's `TorchNoopModel`."""

import gymnasium as gym
import numpy as np
import torch

from corral.agents.ddpg.noop_model import TorchNoopModel
from corral.agents.pg import PGTorchPolicy, pg_torch_loss
from corral.agents.pg.pg_torch_policy import pg_loss_stats


def test_pg_loss_functions_train_through_with_updates():
    from corral.agents.pg import PGTrainer

    calls = []

    def loss(policy, model, dist_class, train_batch):
        calls.append(len(train_batch["obs"]))
        return pg_torch_loss(policy, model, dist_class, train_batch)

    policy_cls = PGTorchPolicy.with_updates(name="MyPG", loss_fn=loss, stats_fn=pg_loss_stats)

    class MyPGTrainer(PGTrainer):
        def get_default_policy_class(self, config):
            return policy_cls

    trainer = MyPGTrainer(
        config={"num_workers": 0, "train_batch_size": 40, "rollout_fragment_length": 40},
        env="CartPole-v1",
    )
    try:
        result = trainer.train()
    finally:
        trainer.stop()
    assert calls and calls[0] == 40
    stats = result["info"]["learner"]["default_policy"]["learner_stats"]
    assert np.isfinite(stats["policy_loss"])


def test_torch_noop_model_passes_observations_through():
    space = gym.spaces.Box(-1, 1, (3,), np.float32)
    model = TorchNoopModel(space, gym.spaces.Box(-1, 1, (1,)), 3, {}, "noop")
    out, state = model({"obs": torch.ones(2, 3)}, [], None)
    assert out.tolist() == [[1.0] * 3] * 2 and state == []
