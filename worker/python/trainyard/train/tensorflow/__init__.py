"""trainyard.train.tensorflow (ray.train.tensorflow): TensorflowTrainer. Each worker gets
TF_CONFIG (cluster and task) from its agent, as tf.distribute.MultiWorkerMirroredStrategy reads
it; TensorFlow itself is only needed on the nodes."""

from .._trainer import DataParallelTrainer
from .._vocab import BACKEND_TENSORFLOW

__all__ = ["TensorflowTrainer"]


class TensorflowTrainer(DataParallelTrainer):
    """DataParallelTrainer with the tensorflow backend (TF_CONFIG on every worker)."""

    _backend = BACKEND_TENSORFLOW
