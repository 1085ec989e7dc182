"""TD3 (Fujimoto et al. 2018): DDPG with twin critics, target policy smoothing
and delayed actor updates, with RLlib 1.x's TD3 defaults."""

from __future__ import annotations

from corral.agents.config import merge_trainer_configs
from corral.agents.ddpg.ddpg import DEFAULT_CONFIG as DDPG_CONFIG
from corral.agents.ddpg.ddpg import DDPGTrainer

TD3_DEFAULT_CONFIG = merge_trainer_configs(
    DDPG_CONFIG,
    {
        # The three tricks of TD3 (arXiv:1802.09477, sec. 4-5).
        "twin_q": True,
        "policy_delay": 2,
        "smooth_target_policy": True,
        "target_noise": 0.2,
        "target_noise_clip": 0.5,
        # Gaussian exploration noise after 10,000 uniformly random steps.
        "exploration_config": {
            "type": "GaussianNoise",
            "random_timesteps": 10000,
            "stddev": 0.1,
            "initial_scale": 1.0,
            "final_scale": 1.0,
            "scale_timesteps": 1,
        },
        "learning_starts": 10000,
        "actor_hiddens": [400, 300],
        "critic_hiddens": [400, 300],
        "n_step": 1,
        "gamma": 0.99,
        "actor_lr": 1e-3,
        "critic_lr": 1e-3,
        "l2_reg": 0.0,
        "tau": 5e-3,
        "train_batch_size": 100,
        "use_huber": False,
        "target_network_update_freq": 0,
        "num_workers": 0,
        "num_gpus_per_worker": 0,
        "worker_side_prioritization": False,
        "replay_buffer_config": {"type": "MultiAgentReplayBuffer", "capacity": 1000000},
        "prioritized_replay": False,
        "clip_rewards": False,
        "use_state_preprocessor": False,
    },
)


class TD3Trainer(DDPGTrainer):
    """Twin Delayed DDPG (arXiv:1802.09477)."""

    _name = "TD3"
    _default_config = TD3_DEFAULT_CONFIG
