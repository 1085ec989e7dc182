"""IMPALA: asynchronous actor-learner training with V-trace (Espeholt et al. 2018)."""
