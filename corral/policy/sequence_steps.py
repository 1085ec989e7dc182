"""Which steps of replayed sequences a recurrent off-policy loss trains on, and where each
bootstraps (R2D2, RNNSAC).

A replayed minibatch holds `B` sequences padded to `T` steps (rows `[B * T]`, with
`seq_lens`, `seq_mask` and each sequence's `state_in_<i>`; see
`corral.core.learner.training_data.pad_sequences`). Within a sequence, the target of step
t bootstraps from step t + k of the same sequence (k = 1, or the row's n-step length), so
one pass of the recurrent nets over the sequence gives both ends of every transition. A
step is trained when it is real (not padding), after the first `burn_in` steps (they only
warm up the recurrent state), and its bootstrap step is inside the sequence unless the
episode terminated there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from corral.core.learner.training_data import SEQ_MASK
from corral.policy.sample_batch import SampleBatch
from corral.utils.replay_buffers import N_STEP, WEIGHTS


@dataclass
class SequenceSteps:
    """The steps of `num_seqs` replayed sequences of `length` steps (all `[B, T]`).

    Attributes:
        num_seqs: B.
        length: T.
        next_step: the step each one bootstraps from (clamped into the sequence).
        discount: gamma^k (1 - terminated) of each step.
        mask: the steps trained on.
        weights: each step's prioritized-replay weight times `mask`.
    """

    num_seqs: int
    length: int
    next_step: torch.Tensor
    discount: torch.Tensor
    mask: torch.Tensor
    weights: torch.Tensor

    @classmethod
    def of(cls, batch: Mapping[str, torch.Tensor], gamma: float, burn_in: int) -> SequenceSteps:
        """The steps of a padded-sequence minibatch (computed without a gradient)."""
        seq_lens = batch[SampleBatch.SEQ_LENS]
        num_seqs = len(seq_lens)
        length = batch[SampleBatch.REWARDS].shape[0] // num_seqs
        with torch.no_grad():
            steps = torch.arange(length, device=seq_lens.device)
            k = batch.get(N_STEP)
            k = (
                torch.ones(num_seqs, length, device=seq_lens.device)
                if k is None
                else k.float().reshape(num_seqs, length)
            )
            bootstrap_step = steps + k.long()
            terminated = batch[SampleBatch.TERMINATEDS].reshape(num_seqs, length).bool()
            mask = (
                batch[SEQ_MASK].reshape(num_seqs, length)
                & (steps >= burn_in)
                & ((bootstrap_step < seq_lens.reshape(-1, 1)) | terminated)
            )
            weights = mask.float()
            if WEIGHTS in batch:
                weights = weights * batch[WEIGHTS].float().reshape(num_seqs, length)
            return cls(
                num_seqs,
                length,
                bootstrap_step.clamp(max=length - 1),
                gamma**k * (~terminated).float(),
                mask,
                weights,
            )

    def per_step(self, rows: torch.Tensor) -> torch.Tensor:
        """Rows `[B * T, ...]` as `[B, T, ...]`."""
        return rows.reshape(self.num_seqs, self.length, *rows.shape[1:])

    def at_next_step(self, values: torch.Tensor) -> torch.Tensor:
        """`values [B, T]` at each step's bootstrap step."""
        return values.gather(1, self.next_step)

    def mean(self, per_step: torch.Tensor) -> torch.Tensor:
        """The mean of `per_step [B, T]` over the trained steps (0 when none is)."""
        return (per_step * self.mask).sum() / self.mask.sum().clamp(min=1)

    def weighted_mean(self, per_step: torch.Tensor) -> torch.Tensor:
        """The mean of `per_step [B, T]` over the trained steps, each weighted by its
        prioritized-replay weight (0 when no step is trained)."""
        return (self.weights * per_step).sum() / self.mask.sum().clamp(min=1)

    def per_sequence_mean(self, per_step: torch.Tensor) -> torch.Tensor:
        """`[B]`: the mean of `per_step [B, T]` over each sequence's trained steps (a
        sequence's priority from its |TD errors|)."""
        return (per_step * self.mask).sum(1) / self.mask.sum(1).clamp(min=1)


__all__ = ["SequenceSteps"]
