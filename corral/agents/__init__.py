"""RLlib 1.13's `agents` package: the trainers, their configs and callbacks.

The algorithms live in subpackages (`corral.agents.ppo`, ...); other RLlib names of this
package are served lazily by `corral._surface`.
"""

from corral.agents.config import with_common_config
from corral.agents.trainer_config import TrainerConfig

__all__ = ["TrainerConfig", "with_common_config"]
