"""Learners: where losses are minimised (`Learner.update`)."""

from corral.core.learner.learner import Learner, TrainingData
from corral.core.learner.learner_group import LearnerGroup

__all__ = ["Learner", "LearnerGroup", "TrainingData"]
