"""A custom loss: `PPOTorchPolicy.with_updates(loss_fn=...)` and `build_policy_class`.

Two ways RLlib 1.x users changed a policy's loss, both shown on CartPole-v1:

1. `PPOTorchPolicy.with_updates(name=..., loss_fn=...)`: PPO's own loss plus a
   penalty on large logits (a "logit L2" regulariser), its value reported in
   the learner stats; a `PPOTrainer` subclass picks the policy through
   `get_default_policy_class`.
2. `build_policy_class(...)` from scratch: plain REINFORCE (returns-to-go as the
   weights of -log pi(a|s)), its returns computed in `postprocess_fn`, run by a
   trainer made with `build_trainer`.

    python examples/custom_loss_with_updates.py [--stop-iters 8] [--smoke]
"""

from __future__ import annotations

import argparse

import torch

from corral.agents.pg import DEFAULT_CONFIG as PG_CONFIG
from corral.agents.ppo import PPOTrainer
from corral.agents.ppo.ppo_torch_policy import PPOTorchPolicy
from corral.agents.trainer_template import build_trainer
from corral.evaluation.postprocessing import discount_cumsum
from corral.policy.policy_template import build_policy_class
from corral.policy.sample_batch import SampleBatch

LOGIT_L2 = 1e-3


# -- 1. PPO's loss plus a regulariser, via with_updates ---------------------


def ppo_loss_with_logit_penalty(policy, model, dist_class, train_batch):
    """PPO's loss, plus LOGIT_L2 * mean(logits ** 2)."""
    total, stats = PPOTorchPolicy.loss(policy, model, dist_class, train_batch)
    logits, _ = model({"obs": train_batch[SampleBatch.OBS]}, [], None)
    penalty = LOGIT_L2 * torch.mean(logits**2)
    stats = {**stats, "logit_penalty": penalty.detach()}
    return total + penalty, stats


PPOWithLogitPenalty = PPOTorchPolicy.with_updates(
    name="PPOWithLogitPenalty", loss_fn=ppo_loss_with_logit_penalty
)


class PenalisedPPOTrainer(PPOTrainer):
    def get_default_policy_class(self, config):
        return PPOWithLogitPenalty


# -- 2. REINFORCE from scratch, via build_policy_class + build_trainer ------


def returns_to_go(policy, sample_batch, other_agent_batches=None, episode=None):
    """Discounted returns within each episode of the batch, as the column "returns"."""
    returns = sample_batch[SampleBatch.REWARDS].astype("float32").copy()
    eps = sample_batch[SampleBatch.EPS_ID]
    for eps_id in set(eps.tolist()):
        rows = eps == eps_id
        returns[rows] = discount_cumsum(sample_batch[SampleBatch.REWARDS][rows], 0.99)
    sample_batch["returns"] = returns
    return sample_batch


def reinforce_loss(policy, model, dist_class, train_batch):
    logits, _ = model({"obs": train_batch[SampleBatch.OBS]}, [], None)
    logp = dist_class(logits, model).logp(train_batch[SampleBatch.ACTIONS])
    returns = train_batch["returns"]
    weights = (returns - returns.mean()) / (returns.std() + 1e-6)
    return -torch.mean(logp * weights)


ReinforcePolicy = build_policy_class(
    name="ReinforcePolicy",
    framework="torch",
    loss_fn=reinforce_loss,
    postprocess_fn=returns_to_go,
    get_default_config=lambda: PG_CONFIG,
)
ReinforceTrainer = build_trainer(
    name="Reinforce", default_config=PG_CONFIG, default_policy=ReinforcePolicy
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stop-iters", type=int, default=8)
    parser.add_argument("--smoke", action="store_true", help="two quick iterations each")
    args = parser.parse_args()
    iters = 2 if args.smoke else args.stop_iters
    batch = 400 if args.smoke else 1000

    ppo = PenalisedPPOTrainer(
        env="CartPole-v1",
        config={
            "num_workers": 0,
            "rollout_fragment_length": batch,
            "train_batch_size": batch,
            "sgd_minibatch_size": 128,
            "num_sgd_iter": 6,
            "lr": 1e-3,
            "model": {"fcnet_hiddens": [32, 32]},
            "seed": 0,
        },
    )
    reinforce = ReinforceTrainer(
        env="CartPole-v1",
        config={
            "num_workers": 0,
            "rollout_fragment_length": batch,
            "train_batch_size": batch,
            "lr": 1e-2,
            "model": {"fcnet_hiddens": [32, 32]},
            "seed": 0,
        },
    )
    try:
        for _ in range(iters):
            r_ppo, r_pg = ppo.train(), reinforce.train()
            stats = r_ppo["info"]["learner"]["default_policy"]["learner_stats"]
            print(
                f"iter {r_ppo['training_iteration']:2d}  "
                f"PPO+penalty return {r_ppo['episode_reward_mean']:6.1f} "
                f"(logit_penalty {stats['logit_penalty']:.1e})  "
                f"REINFORCE return {r_pg['episode_reward_mean']:6.1f}"
            )
    finally:
        ppo.stop()
        reinforce.stop()
    print(
        f"Policies: {type(ppo.get_policy()).__name__}, {type(reinforce.get_policy()).__name__}; "
        f"final returns {r_ppo['episode_reward_mean']:.1f} / {r_pg['episode_reward_mean']:.1f}"
    )


if __name__ == "__main__":
    main()
