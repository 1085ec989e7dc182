"""Learners: where losses are minimised (`Learner.update`)."""

from corral.core.learner.learner import (
    Learner,
    NonFiniteUpdateError,
    TrainingData,
    check_finite_update,
)
from corral.core.learner.learner_group import LearnerGroup

__all__ = [
    "Learner",
    "LearnerGroup",
    "NonFiniteUpdateError",
    "TrainingData",
    "check_finite_update",
]
