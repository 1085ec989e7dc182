"""RLlib 1.13's pre-checks: `env.check_env` validates an env before training with it."""
