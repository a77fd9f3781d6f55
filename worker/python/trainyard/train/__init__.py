"""trainyard.train: Ray Train's user-facing API on Trainyard, so that porting is an import
change (`ray.train` -> `trainyard.train`, `ray.train.torch` -> `trainyard.train.torch`).
Standard library only on the submitting side; see docs/python-api.md.

    from trainyard.train import ScalingConfig, RunConfig, Checkpoint
    from trainyard.train.torch import TorchTrainer
    import trainyard.train

    def train_func(config):
        ...
        trainyard.train.report({"loss": loss}, checkpoint=Checkpoint.from_directory(d))

    if __name__ == "__main__":
        result = TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2)).fit()
"""

from ._checkpoint import (Checkpoint, MetricAssertionError, Result, TrainingFailedError,
                          check_assertions)
from ._config import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
from ._session import (TrainContext, get_checkpoint, get_context, get_dataset_shard,
                       load_checkpoint, local_rank, report, save_checkpoint, world_rank,
                       world_size)
from ._trainer import DataParallelTrainer
from ._legacy import Trainer
from .callbacks import TrainingCallback

_LAZY = ("Client", "JobSubmissionClient", "TrainyardAPIError")


def __getattr__(name):
    """The REST client's names, imported on first use: a worker's runner never needs
    urllib (about a third of this package's import time)."""
    if name == "JobSubmissionClient":
        from ..job_submission import JobSubmissionClient
        return JobSubmissionClient
    if name in _LAZY:
        from . import _client
        return getattr(_client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Checkpoint", "CheckpointConfig", "Client", "DataParallelTrainer", "FailureConfig",
    "JobSubmissionClient", "MetricAssertionError", "Result", "RunConfig", "ScalingConfig",
    "TrainContext", "TrainingFailedError", "TrainyardAPIError", "check_assertions",
    "get_checkpoint", "get_context", "get_dataset_shard", "report",
    "Trainer", "TrainingCallback", "save_checkpoint", "load_checkpoint", "world_rank",
    "local_rank", "world_size",
]
