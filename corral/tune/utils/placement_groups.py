"""``ray.tune.utils.placement_groups``'s ``PlacementGroupFactory``: a trial's resource
request (``tune.run(resources_per_trial=...)``, ``Trainer.default_resource_request``).

The same object as ``corral.tune.PlacementGroupFactory`` (corral's stand-in, which takes
Ray's ``bundles`` and ``strategy``).
"""

from corral.tune.resources import ResourceRequest as PlacementGroupFactory

__all__ = ["PlacementGroupFactory"]
