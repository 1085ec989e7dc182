"""Loads torch and gymnasium, then freezes the heap, before the trainers' modules load.

`gc.freeze()` moves every object that exists to a permanent generation that the
collector skips (what pre-forking servers do after loading their code). Without
it, each full collection that triggers while the rest of corral loads traverses
torch's hundreds of thousands of long-lived objects: about 0.2 s of corral's
start-up on a slow machine. Forked rollout workers also keep those objects'
pages shared with the driver, since a collection writes to every object it
traverses. Only objects alive at this point are frozen; garbage made later is
collected as usual.
"""

import gc

import gymnasium  # noqa: F401
import torch  # noqa: F401

gc.freeze()
