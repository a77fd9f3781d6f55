"""trainyard.train.torch (ray.train.torch): TorchTrainer, prepare_model, prepare_data_loader,
get_device. The runner has set up the default process group (NCCL with GPUs, else Gloo) before
the training function runs; torch is needed on the nodes only."""

import os

from .._trainer import DataParallelTrainer
from .._vocab import BACKEND_TORCH

__all__ = ["TorchTrainer", "get_device", "prepare_model", "prepare_data_loader"]


class TorchTrainer(DataParallelTrainer):
    """DataParallelTrainer with the torch backend: torch.distributed is initialised on every
    worker before train_loop_per_worker runs."""

    _backend = BACKEND_TORCH


def get_device():
    """This worker's device: its GPU when it has one, else the CPU."""
    import torch
    if torch.cuda.is_available() and os.environ.get("CUDA_VISIBLE_DEVICES", "") != "":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _distributed():
    import torch.distributed as dist
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def prepare_model(model, move_to_device=True, parallel_strategy="ddp",
                  parallel_strategy_kwargs=None):
    """Moves the model to get_device() and wraps it in DistributedDataParallel when there are
    several workers (parallel_strategy None: no wrapping)."""
    import torch
    device = get_device()
    if move_to_device:
        model = model.to(device)
    if parallel_strategy and _distributed():
        kw = dict(parallel_strategy_kwargs or {})
        if device.type == "cuda":
            kw.setdefault("device_ids", [device.index])
        model = torch.nn.parallel.DistributedDataParallel(model, **kw)
    return model


class _DeviceLoader:
    """A DataLoader whose batches arrive on the device, and whose DistributedSampler moves on
    to the next epoch each time it is iterated (as Ray's does)."""

    def __init__(self, loader, device, move):
        self._loader, self._device, self._move = loader, device, move
        self._epoch = 0

    def __len__(self):
        return len(self._loader)

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def _to(self, batch):
        if hasattr(batch, "to"):
            return batch.to(self._device)
        if isinstance(batch, (list, tuple)):
            return type(batch)(self._to(b) for b in batch)
        if isinstance(batch, dict):
            return {k: self._to(v) for k, v in batch.items()}
        return batch

    def __iter__(self):
        sampler = getattr(self._loader, "sampler", None)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(self._epoch)
        self._epoch += 1
        for batch in self._loader:
            yield self._to(batch) if self._move else batch


def prepare_data_loader(data_loader, add_dist_sampler=True, move_to_device=True):
    """Gives each worker its share of the data (a DistributedSampler, shuffling when the loader
    did) and moves batches to get_device()."""
    from torch.utils.data import DataLoader, RandomSampler
    from torch.utils.data.distributed import DistributedSampler
    loader = data_loader
    if add_dist_sampler and _distributed() and \
            not isinstance(getattr(loader, "sampler", None), DistributedSampler):
        shuffle = isinstance(loader.sampler, RandomSampler)
        loader = DataLoader(loader.dataset, batch_size=loader.batch_size,
                            sampler=DistributedSampler(loader.dataset, shuffle=shuffle),
                            num_workers=loader.num_workers, collate_fn=loader.collate_fn,
                            pin_memory=loader.pin_memory, drop_last=loader.drop_last)
    return _DeviceLoader(loader, get_device(), move_to_device)
