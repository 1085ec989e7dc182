"""IMPALA: asynchronous actor-learner training with V-trace (Espeholt et al. 2018)."""

from corral.agents.impala.impala import DEFAULT_CONFIG, ImpalaTrainer

__all__ = ["DEFAULT_CONFIG", "ImpalaTrainer"]
