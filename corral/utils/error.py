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
