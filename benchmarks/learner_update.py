"""Samples/s of corral's `Learner.update` for PPO against a hand-written torch loop.

Both sides train on the same real batch (CartPole-v1, collected by a
trainer's local worker, advantages standardised): `--batch` samples, minibatches
of `--minibatch`, `--epochs` epochs, shuffled per epoch with `torch.randperm`.

- corral: `trainer.learner_group.update(batch=..., num_epochs, minibatch_size,
  shuffle_batch_per_epoch=True)` with the PPO loss of `PPOTorchPolicy` and
  the 64x64 tanh MLP (separate value net) of the model catalog.
- raw: the same architecture built by hand, the batch turned into tensors
  once, then per minibatch: forward both nets, clipped surrogate + KL penalty
  - entropy bonus + clipped squared value error, `backward`, global-norm
  gradient clipping to 0.5, Adam step. Nothing else (no statistics).

Samples/s = batch size x epochs / seconds per update; alternating, median of
`--repeats`. Both run in the same process with the same torch thread count:
the one corral's trainer sets in the driver (`num_cpus_for_driver`, default 1)
unless `--threads` overrides it (reported as `torch_threads`).

`--torch-compile [BACKEND]` trains corral's side with `torch_compile_learner` (dynamo
backend BACKEND, default inductor); the warm-up update, which compiles, is timed
apart as `corral_first_update_s`.

Usage:
    python benchmarks/learner_update.py
    python benchmarks/learner_update.py --quick
    python benchmarks/learner_update.py --torch-compile
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from _common import emit, log, machine_info, median, ratio

HIDDENS = [64, 64]
LOSS = {
    "clip_param": 0.3,
    "vf_clip_param": 10.0,
    "vf_loss_coeff": 1.0,
    "entropy_coeff": 0.01,
    "kl_coeff": 0.2,
    "grad_clip": 0.5,
    "lr": 5e-5,
}


def make_trainer(args: argparse.Namespace):
    from corral.agents.ppo import PPOTrainer

    config = {
        "num_workers": 0,
        "num_envs_per_worker": 8,
        "rollout_fragment_length": 100,
        "train_batch_size": args.batch,
        "sgd_minibatch_size": args.minibatch,
        "num_sgd_iter": args.epochs,
        "model": {"fcnet_hiddens": HIDDENS, "fcnet_activation": "tanh", "vf_share_layers": False},
        "seed": 0,
        "log_level": "ERROR",
        **LOSS,
    }
    if args.torch_compile:
        config["torch_compile_learner"] = True
        config["torch_compile_learner_dynamo_backend"] = args.torch_compile
    return PPOTrainer(config=config, env="CartPole-v1")


def collect_batch(trainer, size: int):
    from corral.agents.ppo.ppo import standardize
    from corral.policy.sample_batch import SampleBatch, concat_samples

    worker = trainer.workers.local_worker()
    parts, count = [], 0
    while count < size:
        parts.append(worker.sample())
        count += parts[-1].count
    batch = concat_samples(parts).slice(0, size)
    standardize(batch, SampleBatch.ADVANTAGES)
    return batch


class RawPPOLearner:
    """The PPO update written out in plain torch."""

    def __init__(self, obs_dim: int, num_actions: int, seed: int = 0) -> None:
        import torch
        from torch import nn

        torch.manual_seed(seed)

        def mlp(out: int) -> nn.Sequential:
            layers: list[nn.Module] = []
            size = obs_dim
            for h in HIDDENS:
                layers += [nn.Linear(size, h), nn.Tanh()]
                size = h
            layers.append(nn.Linear(size, out))
            return nn.Sequential(*layers)

        self.pi = mlp(num_actions)
        self.vf = mlp(1)
        self.params = list(self.pi.parameters()) + list(self.vf.parameters())
        self.optimizer = torch.optim.Adam(self.params, lr=LOSS["lr"])
        self.generator = torch.Generator().manual_seed(seed)

    def update(self, columns: dict[str, Any], epochs: int, minibatch: int) -> None:
        import torch

        t = {k: torch.from_numpy(v) for k, v in columns.items()}
        obs, actions, old_logp = t["obs"], t["actions"].long(), t["action_logp"]
        old_logits, adv, targets = t["action_dist_inputs"], t["advantages"], t["value_targets"]
        n = len(obs)
        eps, vf_clip = LOSS["clip_param"], LOSS["vf_clip_param"]
        for _ in range(epochs):
            order = torch.randperm(n, generator=self.generator)
            for i in range(n // minibatch):
                idx = order[i * minibatch : (i + 1) * minibatch]
                logp_all = torch.log_softmax(self.pi(obs[idx]), dim=-1)
                values = self.vf(obs[idx]).squeeze(-1)
                logp = logp_all.gather(-1, actions[idx].unsqueeze(-1)).squeeze(-1)
                ratio_ = torch.exp(logp - old_logp[idx])
                a = adv[idx]
                surrogate = torch.minimum(a * ratio_, a * ratio_.clamp(1 - eps, 1 + eps))
                old_logp_all = torch.log_softmax(old_logits[idx], dim=-1)
                kl = (old_logp_all.exp() * (old_logp_all - logp_all)).sum(-1)
                entropy = -(logp_all.exp() * logp_all).sum(-1)
                vf_loss = ((values - targets[idx]) ** 2).clamp(0.0, vf_clip)
                loss = (
                    -surrogate
                    + LOSS["kl_coeff"] * kl
                    - LOSS["entropy_coeff"] * entropy
                    + LOSS["vf_loss_coeff"] * vf_loss
                ).mean()
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.params, LOSS["grad_clip"])
                self.optimizer.step()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=4000)
    parser.add_argument("--minibatch", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch threads for both (0: what corral's trainer sets, num_cpus_for_driver)",
    )
    parser.add_argument("--quick", action="store_true", help="1000 samples, 2 epochs, 1 repeat")
    parser.add_argument(
        "--torch-compile",
        nargs="?",
        const="inductor",
        default=None,
        metavar="BACKEND",
        help="corral: `torch_compile_learner` with this dynamo backend (default inductor)",
    )
    args = parser.parse_args()
    if args.quick:
        args.batch, args.epochs, args.repeats = 1000, 2, 1

    import torch

    emit({"bench": "learner_update", "machine": machine_info()})
    trainer = make_trainer(args)
    if args.threads:  # after the trainer, which sets the driver's threads
        torch.set_num_threads(args.threads)
    try:
        log(f"learner_update: collecting {args.batch} samples")
        batch = collect_batch(trainer, args.batch)
        obs_dim = batch["obs"].shape[1]
        num_actions = trainer.get_policy().action_space.n
        columns = {
            k: batch[k]
            for k in (
                "obs",
                "actions",
                "action_logp",
                "action_dist_inputs",
                "advantages",
                "value_targets",
            )
        }
        raw = RawPPOLearner(obs_dim, num_actions)
        samples = args.batch * args.epochs

        def corral_update() -> None:
            trainer.learner_group.update(
                batch=batch,
                num_epochs=args.epochs,
                minibatch_size=args.minibatch,
                shuffle_batch_per_epoch=True,
            )

        def raw_update() -> None:
            raw.update(columns, args.epochs, args.minibatch)

        # Warm-up: one update each (first-call costs: allocator, optimizer state, and
        # with --torch-compile the compilation, reported as `corral_first_update_s`).
        t0 = time.perf_counter()
        corral_update()
        first_update_s = time.perf_counter() - t0
        raw_update()
        corral_rates, raw_rates = [], []
        for rep in range(args.repeats):
            t0 = time.perf_counter()
            corral_update()
            corral_rates.append(samples / (time.perf_counter() - t0))
            t0 = time.perf_counter()
            raw_update()
            raw_rates.append(samples / (time.perf_counter() - t0))
            log(
                f"  rep {rep}: corral {corral_rates[-1]:,.0f} samples/s, "
                f"raw {raw_rates[-1]:,.0f} samples/s"
            )
    finally:
        trainer.stop()
    c, r = median(corral_rates), median(raw_rates)
    minibatches = (args.batch // args.minibatch) * args.epochs
    emit(
        {
            "bench": "learner_update",
            "batch": args.batch,
            "minibatch": args.minibatch,
            "epochs": args.epochs,
            "minibatches_per_update": minibatches,
            "corral_samples_per_s": c,
            "raw_samples_per_s": r,
            "ratio": ratio(c, r),
            "corral_ms_per_minibatch": 1000 * samples / c / minibatches,
            "raw_ms_per_minibatch": 1000 * samples / r / minibatches,
            "corral_first_update_s": first_update_s,
            "torch_compile": args.torch_compile,
            "corral_runs": corral_rates,
            "raw_runs": raw_rates,
            "torch_threads": torch.get_num_threads(),
            "loss": LOSS,
        }
    )


if __name__ == "__main__":
    main()
