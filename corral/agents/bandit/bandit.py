"""Linear contextual bandits through the classic Trainer API: LinUCB and linear TS.

`BanditLinUCBTrainer` acts on upper confidence bounds (Li et al. 2010, "A Contextual-Bandit
Approach to Personalized News Article Recommendation", arXiv:1003.0146); `BanditLinTSTrainer`
on weights drawn from their posterior (Agrawal & Goyal 2013, "Thompson Sampling for
Contextual Bandits with Linear Payoffs", arXiv:1209.3352). Both fit one ridge regression per
arm in closed form (`bandit_torch_model`).

`DEFAULT_CONFIG` keeps RLlib 1.13's: online learning, one step at a time (fragments and
train batches of 1), 100 steps per `train()` iteration. One training step is the
Trainer's default (RLlib 1.13's): sample `train_batch_size` steps, update the models on
them, push the new statistics to the workers.

The regressions' options are model keys, as in RLlib 1.13: `model: {"alpha": ...,
"lambda_": ...}` (exploration strength, default 1; ridge prior, default 1, 0.1 for the
parametric model).
"""

from __future__ import annotations

from corral.agents.bandit.bandit_torch_policy import BanditTorchPolicy
from corral.agents.config import with_common_config
from corral.agents.trainer import Trainer

DEFAULT_CONFIG = with_common_config(
    {
        # No remote workers by default: a bandit's update is a few small matrix ops.
        "num_workers": 0,
        # The bandits run on PyTorch.
        "framework": "torch",
        # Online learning: each worker's fragments are one step long.
        "rollout_fragment_length": 1,
        # Online learning: the models are updated after every step.
        "train_batch_size": 1,
        # Steps per `train()` iteration: one step each would be slow (each iteration
        # collects metrics), so an iteration runs 100 of them.
        "timesteps_per_iteration": 100,
    }
)

# The model keys the bandits' regressions read (RLlib 1.13's), beyond MODEL_DEFAULTS.
BANDIT_MODEL_KEYS = ("alpha", "lambda_")


class _BanditTrainer(Trainer):
    """What the two bandit trainers share: the policy and its model keys."""

    _default_config = DEFAULT_CONFIG
    _policy_class = BanditTorchPolicy

    @staticmethod
    def _validate_config(config: dict, trainer_obj_or_none: Trainer | None = None) -> None:
        """The common checks, with the regressions' own `model` keys (`alpha`,
        `lambda_`) accepted as the model options they are here."""
        model = config.get("model")
        own = {}
        if isinstance(model, dict):
            own = {k: model.pop(k) for k in BANDIT_MODEL_KEYS if k in model}
        try:
            Trainer._validate_config(config, trainer_obj_or_none)
        finally:
            if isinstance(config.get("model"), dict):
                config["model"].update(own)

    def validate_config(self, config: dict) -> None:
        """Data-parallel learners would each fit only their share of the rows."""
        super().validate_config(config)
        if config.get("num_learners"):
            raise ValueError(
                f"num_learners={config['num_learners']}: the bandits update their models "
                "in closed form on one learner; data-parallel learners are not built for "
                "them. Set num_learners=0 (sampling scales with num_workers)."
            )


class BanditLinUCBTrainer(_BanditTrainer):
    """Linear UCB (Li et al. 2010): the arm with the highest `x^T theta` plus confidence
    width `sqrt(alpha x^T A^-1 x)`."""

    _name = "BanditLinUCB"
    _default_config = Trainer.merge_trainer_configs(
        DEFAULT_CONFIG,
        {
            # How arms are pulled, and so which model scores them: "UpperConfidenceBound"
            # (LinUCB's highest upper confidence bound) or "ThompsonSampling" (LinTS's best
            # arm under weights drawn from their posterior). Without exploration: the arm
            # of the best estimate `x^T theta`.
            "exploration_config": {"type": "UpperConfidenceBound"},
        },
    )


class BanditLinTSTrainer(_BanditTrainer):
    """Linear Thompson sampling (Agrawal & Goyal 2013): the best arm under `theta` drawn
    from N(theta_hat, alpha A^-1)."""

    _name = "BanditLinTS"
    _default_config = Trainer.merge_trainer_configs(
        DEFAULT_CONFIG,
        {
            # How arms are pulled: see `BanditLinUCBTrainer`'s `exploration_config`.
            "exploration_config": {"type": "ThompsonSampling"},
        },
    )


__all__ = ["DEFAULT_CONFIG", "BanditLinTSTrainer", "BanditLinUCBTrainer"]
