"""Ray Train's configuration objects, with its names and meanings, turned into a Trainyard job
spec (DESIGN.md section 3)."""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ._vocab import CHECKPOINT_SCORE_ORDERS, PLACEMENT_STRATEGIES, SCORE_MAX

__all__ = ["ScalingConfig", "RunConfig", "CheckpointConfig", "FailureConfig"]


@dataclass
class ScalingConfig:
    """How many workers and what each gets (ray.train.ScalingConfig)."""
    num_workers: int = 1
    use_gpu: bool = False
    resources_per_worker: Optional[Dict[str, float]] = None
    placement_strategy: str = PLACEMENT_STRATEGIES[0]
    accelerator_type: Optional[str] = None

    def to_spec(self):
        if isinstance(self.num_workers, bool) or not isinstance(self.num_workers, int) \
                or self.num_workers < 1:
            raise ValueError("ScalingConfig.num_workers must be an integer >= 1")
        out = {"num_workers": self.num_workers, "use_gpu": bool(self.use_gpu),
               "placement_strategy": self.placement_strategy}
        if self.resources_per_worker:
            out["resources_per_worker"] = dict(self.resources_per_worker)
        if self.accelerator_type:
            out["accelerator_type"] = self.accelerator_type
        return out


@dataclass
class CheckpointConfig:
    """Which checkpoints to keep (ray.train.CheckpointConfig): num_to_keep, by
    checkpoint_score_attribute in checkpoint_score_order ("max" or "min")."""
    num_to_keep: Optional[int] = None
    checkpoint_score_attribute: Optional[str] = None
    checkpoint_score_order: str = SCORE_MAX

    def to_spec(self):
        if self.checkpoint_score_order not in CHECKPOINT_SCORE_ORDERS:
            raise ValueError("CheckpointConfig.checkpoint_score_order must be one of "
                             + ", ".join(repr(o) for o in CHECKPOINT_SCORE_ORDERS))
        out = {"checkpoint_score_order": self.checkpoint_score_order}
        if self.num_to_keep is not None:
            out["num_to_keep"] = self.num_to_keep
        if self.checkpoint_score_attribute:
            out["checkpoint_score_attribute"] = self.checkpoint_score_attribute
        return out


@dataclass
class FailureConfig:
    """How often a failed attempt is restarted (ray.train.FailureConfig); -1: always."""
    max_failures: int = 0

    def to_spec(self):
        return {"max_failures": self.max_failures}


@dataclass
class RunConfig:
    """The run (ray.train.RunConfig): its name, where checkpoints go (storage_path: a shared
    path every node sees; None: the server's artifact store), retention and restarts.
    verbose: 0 silent, 1 progress lines, 2 also the workers' log lines (default).
    stop: {"reported name": value}: the run (a trial) stops once it reports at least that
    value, decided on the server; or a callable (trial_id, result) -> bool, or a tune.Stopper,
    evaluated on the driver, which then stops the job. callbacks: tune.Callback objects, fed
    from the server's stream as reports arrive (docs/python-api.md)."""
    name: Optional[str] = None
    storage_path: Optional[str] = None
    checkpoint_config: Optional[CheckpointConfig] = None
    failure_config: Optional[FailureConfig] = None
    verbose: int = 2
    metadata: Dict[str, Any] = field(default_factory=dict)
    stop: Any = None
    callbacks: Optional[List[Any]] = None

    def to_spec(self):
        out = {}
        if self.storage_path:
            out["storage_path"] = self.storage_path
        if self.checkpoint_config:
            out["checkpoint_config"] = self.checkpoint_config.to_spec()
        if self.failure_config:
            out["failure_config"] = self.failure_config.to_spec()
        if self.stop is not None and not callable(self.stop):
            if not isinstance(self.stop, dict) or not self.stop:
                raise ValueError("RunConfig(stop=) must be a dict of reported names to values "
                                 "(decided on the server), a function (trial_id, result) -> "
                                 "bool or a tune.Stopper (both run on the driver)")
            out["stop"] = dict(self.stop)
        return out
