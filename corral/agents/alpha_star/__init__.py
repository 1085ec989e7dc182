"""AlphaStar: league-based multi-agent self-play on APPO (RLlib 1.13's `agents.alpha_star`)."""

from corral.agents.alpha_star.alpha_star import DEFAULT_CONFIG, AlphaStarTrainer

__all__ = ["DEFAULT_CONFIG", "AlphaStarTrainer"]
