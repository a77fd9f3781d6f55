"""Data-parallel MLP on Fashion-MNIST with PyTorch DDP, launched by Trainyard: gloo on CPUs, nccl
on the GPU Trainyard gives each worker (a job with scaling_config.use_gpu true; --use-gpu).

Trainyard sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ... so `init_process_group("gloo")`
with the default env:// works unchanged. Without Trainyard the same script runs as one worker:

    python3 train.py --epochs 1

Configuration comes from the job's train_loop_config (TRAINYARD_CONFIG) or the flags below.
"""
import argparse
import gzip
import json
import os
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

try:
    import trainyard  # on PYTHONPATH inside Trainyard; optional when run by hand
except ImportError:
    if "TRAINYARD_JOB_ID" in os.environ:
        raise  # inside Trainyard a missing SDK would silently lose every report
    trainyard = None

DATA_DIR = "/usr/share/datasets/fashion-mnist"


def load_idx(path, limit=0):
    """An IDX file's array; with limit, only its first `limit` items are read and decompressed."""
    with gzip.open(path, "rb") as f:
        magic = int.from_bytes(f.read(4), "big")
        ndim = magic & 0xFF
        dims = [int.from_bytes(f.read(4), "big") for _ in range(ndim)]
        if limit:
            dims[0] = min(dims[0], limit)
        data = f.read(int(np.prod(dims)))
    return np.frombuffer(bytearray(data), dtype=np.uint8).reshape(dims)


def load_split(data_dir, split, limit=0):
    prefix = "train" if split == "train" else "t10k"
    x = load_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"), limit)
    y = load_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"), limit)
    x = torch.from_numpy(x.reshape(len(x), -1)).float().sub_(0.2860 * 255).div_(0.3530 * 255)
    return x, torch.from_numpy(y.astype(np.int64))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.fc2 = nn.Linear(256, 128)
        self.fc3 = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def config():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=128, help="global batch size")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--limit-train", type=int, default=0, help="use only the first N images")
    p.add_argument("--limit-test", type=int, default=0,
                   help="evaluate on the first N test images only")
    p.add_argument("--data-dir", default=DATA_DIR)
    p.add_argument("--use-gpu", choices=("auto", "yes", "no"), default="auto",
                   help="train on CUDA with the nccl backend (auto: when Trainyard gave this "
                        "worker a GPU, i.e. CUDA_VISIBLE_DEVICES is not empty)")
    args = vars(p.parse_args())
    cfg = json.loads(os.environ.get("TRAINYARD_CONFIG") or "{}")
    for k, v in cfg.items():
        args[k.replace("-", "_")] = v
    return args


def main():
    cfg = config()
    torch.set_num_threads(1)
    use_gpu = cfg["use_gpu"]
    if use_gpu in ("auto", None):
        use_gpu = bool(os.environ.get("CUDA_VISIBLE_DEVICES"))
    elif isinstance(use_gpu, str):
        use_gpu = use_gpu == "yes"
    if use_gpu and not torch.cuda.is_available():
        print("use_gpu: CUDA is not available to this worker", file=sys.stderr)
        return 2
    device = torch.device("cuda:0" if use_gpu else "cpu")  # its own GPU is the only one visible
    # With a GPU the process group starts even for one worker: nccl is part of what runs.
    distributed = "RANK" in os.environ and (int(os.environ.get("WORLD_SIZE", "1")) > 1 or use_gpu)
    if distributed:
        dist.init_process_group("nccl" if use_gpu else "gloo")  # env:// from Trainyard
    rank = dist.get_rank() if distributed else 0
    world = dist.get_world_size() if distributed else 1
    torch.manual_seed(0)

    x_train, y_train = load_split(cfg["data_dir"], "train", cfg["limit_train"])
    x_test, y_test = load_split(cfg["data_dir"], "test", cfg["limit_test"])
    x_train, y_train = x_train.to(device), y_train.to(device)
    x_test, y_test = x_test.to(device), y_test.to(device)

    model = MLP().to(device)
    if distributed:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[0] if use_gpu else None)
    opt = torch.optim.SGD(model.parameters(), lr=cfg["lr"], momentum=0.9)
    start_epoch = 0
    resume = os.environ.get("TRAINYARD_CHECKPOINT_DIR")
    if resume and os.path.exists(os.path.join(resume, "model.pt")):
        state = torch.load(os.path.join(resume, "model.pt"), map_location=device)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start_epoch = state["epoch"] + 1

    per_rank = cfg["batch_size"] // world
    n = len(x_train)
    for epoch in range(start_epoch, cfg["epochs"]):
        t0 = time.time()
        g = torch.Generator().manual_seed(epoch)
        order = torch.randperm(n, generator=g).to(device)
        model.train()
        total, count = 0.0, 0
        for b in range(0, n - cfg["batch_size"] + 1, cfg["batch_size"]):
            idx = order[b + rank * per_rank:b + (rank + 1) * per_rank]
            loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
            count += 1
        model.eval()
        with torch.no_grad():
            shard = slice(rank * len(x_test) // world, (rank + 1) * len(x_test) // world)
            correct = (model(x_test[shard]).argmax(1) == y_test[shard]).sum()
            stats = torch.tensor([float(correct), total, float(count)], device=device)
            if distributed:
                dist.all_reduce(stats)
        accuracy = stats[0].item() / len(x_test)
        mean_loss = stats[1].item() / stats[2].item()
        metrics = {"epoch": epoch, "loss": mean_loss, "accuracy": accuracy,
                   "epoch_time_s": time.time() - t0}
        if rank == 0:
            print(json.dumps(metrics), flush=True)
        if trainyard is not None and hasattr(trainyard, "report"):
            ckpt = None
            if rank == 0:
                # A fresh directory each time: another user's run may have left one of the
                # same job id and epoch behind.
                job = os.environ.get("TRAINYARD_JOB_ID", "local")
                ckpt = tempfile.mkdtemp(prefix=f"ty-ckpt-{job}-{epoch}-")
                torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                            "epoch": epoch}, os.path.join(ckpt, "model.pt"))
            trainyard.report(metrics, checkpoint=ckpt)
    if rank == 0:
        print(f"final test accuracy: {accuracy:.4f} ({device}, "
              f"{dist.get_backend() if distributed else 'not distributed'})", flush=True)
    if distributed:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
