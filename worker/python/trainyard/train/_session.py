"""Inside the training function: who this worker is, report(), get_checkpoint(), and a dataset
shard (ray.train.get_context / report / get_checkpoint / get_dataset_shard). Built on the
`import trainyard` worker API, which keeps working alongside."""

import os

import trainyard as _ty

from ._checkpoint import Checkpoint

__all__ = ["TrainContext", "get_context", "report", "get_checkpoint", "get_dataset_shard",
           "save_checkpoint", "load_checkpoint", "world_rank", "local_rank", "world_size"]


class TrainContext:
    """Ray Train's TrainContext methods over the worker's environment."""

    def __init__(self, base):
        self._base = base

    def get_world_rank(self):
        return self._base.world_rank

    def get_world_size(self):
        return self._base.world_size

    def get_local_rank(self):
        return self._base.local_rank

    def get_local_world_size(self):
        return self._base.local_world_size

    def get_node_rank(self):
        return self._base.node_rank

    def get_experiment_name(self):
        return os.environ.get("TRAINYARD_EXPERIMENT_NAME") or f"job-{self._base.job_id}"

    def get_trial_name(self):
        return self.get_experiment_name()

    def get_trial_id(self):
        return str(self._base.job_id)

    def get_trial_dir(self):
        return os.getcwd()

    def get_metadata(self):
        return {}

    @property
    def config(self):
        return self._base.config

    def __repr__(self):
        return f"TrainContext({self._base!r})"


def get_context():
    """This worker's TrainContext."""
    return TrainContext(_ty.get_context())


def report(metrics=None, checkpoint=None, **kwargs):
    """Reports metrics (a dict of any JSON-serialisable values, as in Ray: numbers are charted,
    the others stored and returned as they are; optional int "step") and optionally a Checkpoint (or
    a directory). Returns once the agent owns the report; every rank calls it equally often.
    Ray 1.9's report(**metrics) (report(loss=0.1, epoch=2)) works too."""
    if kwargs:
        metrics = dict(metrics or {}, **kwargs)
    if metrics is None:
        raise TypeError("report() needs metrics: report({'loss': 0.1}) or report(loss=0.1)")
    if checkpoint is not None and not isinstance(checkpoint, (str, os.PathLike)) \
            and getattr(checkpoint, "path", None) is None:
        raise TypeError("checkpoint must be a Checkpoint.from_directory(...) or a directory")
    _ty.report(metrics, checkpoint=checkpoint)


def get_checkpoint():
    """The Checkpoint to resume from (a restart's latest, or resume_from_checkpoint), or None."""
    path = _ty.get_checkpoint()
    return Checkpoint.from_directory(path) if path else None


def save_checkpoint(**state):
    """Ray 1.9: saves `state` (a dict that pickles) as the job's checkpoint. Every rank calls
    it (as often); rank 0's state is kept, as in Ray. A report without metrics."""
    ck = Checkpoint.from_dict(state) if _ty.get_context().world_rank == 0 else None
    _ty.report({}, checkpoint=ck)


def load_checkpoint():
    """Ray 1.9: the dict of the checkpoint to resume from (save_checkpoint's, or the trainer's
    load_checkpoint / run(checkpoint=)), or None."""
    ck = get_checkpoint()
    return ck.to_dict() if ck is not None else None


def world_rank():
    """Ray 1.9: this worker's rank among all workers."""
    return _ty.get_context().world_rank


def local_rank():
    """Ray 1.9: this worker's rank on its node."""
    return _ty.get_context().local_rank


def world_size():
    """Ray 1.9: the number of workers."""
    return _ty.get_context().world_size


_datasets = None  # the trainer's datasets= on this worker (set by the runner)


def set_datasets(datasets):
    global _datasets
    _datasets = datasets


def get_dataset_shard(dataset, rank=None, world_size=None):
    """This worker's share of `dataset`, the name of one of the trainer's datasets= (as in Ray)
    or a dataset itself. A trainyard.data Dataset gives a DataShard (iter_batches,
    iter_torch_batches, iter_rows), reading only this worker's rows or files. A sequence gives
    a list and a torch Dataset a torch.utils.data.Subset: every world_size-th item starting at
    its rank. Either way the ranks' shards are disjoint, cover it, and are the same on every
    run."""
    if isinstance(dataset, str):
        if not _datasets or dataset not in _datasets:
            have = ", ".join(sorted(_datasets or {})) or "none"
            raise KeyError(f"no dataset named {dataset!r} was given to the trainer's datasets= "
                           f"(given: {have})")
        dataset = _datasets[dataset]
    ctx = _ty.get_context()
    rank = ctx.world_rank if rank is None else rank
    world_size = ctx.world_size if world_size is None else world_size
    from .. import data
    if isinstance(dataset, data.Dataset):  # given here, not through datasets=: in memory
        return data.DataShard(dataset._source, rank, world_size, dataset._shuffle,
                              dataset._seed)
    if isinstance(dataset, data._Plan):
        return dataset.shard(rank, world_size)
    indices = range(rank, len(dataset), world_size)
    try:
        from torch.utils.data import Dataset, Subset
        if isinstance(dataset, Dataset):
            return Subset(dataset, list(indices))
    except ImportError:
        pass
    if isinstance(dataset, (list, tuple, range, str, bytes)):
        return dataset[rank::world_size]
    return [dataset[i] for i in indices]
