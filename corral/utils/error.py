"""Exception types shared across corral, kept under RLlib 1.x's names so ported code still
catches them."""


class UnsupportedSpaceException(Exception):
    """Raised when an observation or action space has no model or distribution in corral.

    The message always names the offending space, since the usual cause is an env whose
    space type the user did not expect to matter.
    """


class EnvError(Exception):
    """Raised when an environment is misconfigured or misbehaves (bad id, NaN observations,
    wrong API), as opposed to a bug inside corral."""


class CheckpointError(ValueError):
    """A checkpoint is missing, truncated, corrupted, or not one this trainer can load.

    The message names the file and what was expected of it.
    """


class NoGPUsError(RuntimeError, ValueError):
    """The config asks for GPUs (`num_gpus`, `num_gpus_per_worker`, ...) that torch cannot
    see, and `_fake_gpus` is off.

    A `RuntimeError`, as RLlib 1.13's rollout workers raise it, and a `ValueError` (a bad
    config value), as corral raised it before. The message names the key and its value.
    """


# RLlib 1.13's message templates (for code that formats or matches them).
ERR_MSG_NO_GPUS = (
    "Found {} GPUs on your machine (GPU devices found: {})! If your machine does not have "
    "any GPUs, you should set the config keys `num_gpus` and `num_gpus_per_worker` to 0."
)
ERR_MSG_INVALID_ENV_DESCRIPTOR = (
    "The env string you provided ('{}') is:\n"
    "a) Not a supported/installed environment.\n"
    "b) Not a tune-registered environment creator.\n"
    "c) Not a valid env class string.\n"
    "Register your env with `corral.tune.registry.register_env(name, creator)`, pass the "
    "env class itself, or a dotted path 'package.module.EnvClass'."
)
HOWTO_CHANGE_CONFIG = (
    "\nTo change the config for the `corral train` command, use `--config='{...}'` on the "
    "command line.\nTo change the config for `tune.run()` in a script: modify the dict "
    "passed to `tune.run(config=...)`.\nTo change the config for a Trainer instance: modify "
    "the dict passed to its constructor, e.g. `PPOTrainer(config=...)`.\n"
)
