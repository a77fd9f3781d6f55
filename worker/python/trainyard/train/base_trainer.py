"""trainyard.train.base_trainer (ray.train.base_trainer): where Ray defines
TrainingFailedError."""

from ._checkpoint import TrainingFailedError

__all__ = ["TrainingFailedError"]
