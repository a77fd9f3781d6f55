#!/usr/bin/python3
"""torch.distributed (gloo) allreduce benchmark with the same output as allreduce_bench.

    /usr/bin/python3 bench/allreduce_gloo.py --ranks N [--min BYTES] [--max BYTES] [--factor F] [--seconds S]
"""
import argparse
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def size_arg(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


def rank_main(rank, world, port, lo, hi, factor, seconds):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    buf = torch.arange(hi // 4, dtype=torch.float32) % 7
    if rank == 0:
        print(f"# ranks {world}  float32 sum (gloo)\n# bytes iters sec_per_op algbw_GBps busbw_GBps",
              flush=True)
    size = lo
    while size <= hi:
        t = buf[: size // 4]
        start = time.perf_counter()
        for _ in range(2):
            dist.all_reduce(t)
        per = (time.perf_counter() - start) / 2
        iters = torch.tensor([max(3, min(2000, int(seconds / per) if per > 0 else 1000))])
        dist.broadcast(iters, 0)
        n = int(iters.item())
        dist.barrier()
        start = time.perf_counter()
        for _ in range(n):
            dist.all_reduce(t)
        el = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
        dist.all_reduce(el, op=dist.ReduceOp.MAX)
        op = el.item() / n
        alg = size / op / 1e9
        if rank == 0:
            print(f"{size} {n} {op:.6e} {alg:.3f} {alg * 2 * (world - 1) / world:.3f}", flush=True)
        size *= factor
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--min", type=size_arg, default=4096)
    ap.add_argument("--max", type=size_arg, default=256 << 20)
    ap.add_argument("--factor", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=0.5)
    a = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(rank_main, args=(a.ranks, port, a.min, a.max, a.factor, a.seconds), nprocs=a.ranks,
                       start_method="fork")


if __name__ == "__main__":
    main()
