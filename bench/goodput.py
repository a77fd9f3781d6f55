#!/usr/bin/python3
"""Goodput under failures (issue 12): a 4-worker C Fashion-MNIST job (examples/fashion_mnist,
a checkpoint every epoch, max_failures -1) has one random worker killed with SIGKILL every N
seconds until it succeeds; what share of the worker time went into steps that were kept?

  worker time  sum over attempts of world_size x (attempt placed → its last worker gone)
  kept time    sum over attempts of world_size x the part that led to the final model:
               for an attempt that was killed, from its RUNNING event to the registration of
               the checkpoint the next attempt resumed from (0 when that checkpoint is older);
               for the last attempt, from RUNNING to its end
  goodput      kept / worker time (restart overhead, startup and the lost tail of each killed
               attempt are what is not kept)

A run without kills gives the baseline (its goodput is below 1 only by startup). Prints one line
per N. Not a test: it asserts nothing.

    /usr/bin/python3 bench/goodput.py --build build --every 0,10,5 --epochs 20
"""
import argparse
import json
import os
import random
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_cluster as lc  # noqa: E402


def job_spec(root, build, workers, epochs):
    with open(os.path.join(root, "examples/fashion_mnist/job.json")) as f:
        spec = json.load(f)
    spec["name"] = "goodput"
    spec["entrypoint"] = [os.path.join(build, "examples/fashion_mnist/fashion_mnist")]
    spec["working_dir"] = root
    spec["scaling_config"]["num_workers"] = workers
    spec["train_loop_config"].update({"epochs": epochs, "limit_train": 12000, "limit_test": 1000,
                                      "checkpoint_every": 1, "min_accuracy": 0})
    spec["run_config"]["checkpoint_config"] = {"num_to_keep": 3}
    spec["run_config"]["failure_config"] = {"max_failures": -1}
    return spec


def get(server, path):
    r = server.request("GET", path)
    if r.status != 200:
        raise RuntimeError(f"GET {path}: {r.status}")
    return r.json


def run_once(server, spec, every, rng):
    job = server.submit(spec)["id"]
    next_kill = time.time() + every if every > 0 else None
    while True:
        j = get(server, f"/api/v1/jobs/{job}")
        if j["status"] in ("SUCCEEDED", "FAILED", "STOPPED"):
            break
        if next_kill and time.time() >= next_kill and j["status"] == "RUNNING":
            live = [w for w in get(server, f"/api/v1/jobs/{job}/workers")["workers"]
                    if w["attempt"] == j["attempt"] and w["status"] == "RUNNING" and w["pid"]]
            if live:
                try:
                    os.kill(rng.choice(live)["pid"], signal.SIGKILL)
                except ProcessLookupError:
                    pass
            next_kill = time.time() + every
        time.sleep(0.05)
    if j["status"] != "SUCCEEDED":
        raise RuntimeError(f"job ended {j['status']}: {j['result']}")
    return job


def goodput(server, job):
    atts = get(server, f"/api/v1/jobs/{job}/attempts")["attempts"]
    cks = {c["id"]: c for c in get(server, f"/api/v1/jobs/{job}/checkpoints")["checkpoints"]}
    running = {}
    for e in get(server, f"/api/v1/jobs/{job}/events")["events"]:
        if e["status"] == "RUNNING":
            running.setdefault(e["attempt"], lc.parse_ts(e["at"]))
    worker = kept = 0.0
    for i, a in enumerate(atts):
        start, end = lc.parse_ts(a["created_at"]), lc.parse_ts(a["finished_at"])
        worker += a["world_size"] * (end - start)
        run = running.get(a["attempt"])
        if run is None:
            continue
        if i == len(atts) - 1:
            kept += a["world_size"] * (end - run)
            continue
        ck = cks.get(atts[i + 1]["resumed_from_checkpoint"])
        if ck and ck["attempt"] == a["attempt"]:
            kept += a["world_size"] * max(0.0, lc.parse_ts(ck["created_at"]) - run)
    return len(atts), worker, kept


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.environ.get("TY_BUILD_DIR", os.path.join(lc.ROOT, "build")))
    ap.add_argument("--every", default="0,10,5", help="kill intervals in seconds (0: no kills)")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--workers", type=int, default=4)
    args = ap.parse_args()
    lc.use_build(args.build)
    rng = random.Random(1)
    spec = job_spec(lc.ROOT, os.path.abspath(args.build), args.workers, args.epochs)
    print(f"# {lc.machine_caveats()}")
    print(f"# {args.workers} workers, {args.epochs} epochs, a checkpoint every epoch")
    print(f"{'kill every':>10} {'attempts':>8} {'wall s':>7} {'worker s':>9} {'kept s':>7} "
          f"{'goodput':>7}")
    with lc.Cluster(db="external", agent_cpus=args.workers) as c:
        for every in (float(x) for x in args.every.split(",")):
            t0 = time.time()
            job = run_once(c.server, spec, every, rng)
            wall = time.time() - t0
            n, worker, kept = goodput(c.server, job)
            label = f"{every:.0f} s" if every > 0 else "never"
            print(f"{label:>10} {n:8d} {wall:7.1f} {worker:9.1f} {kept:7.1f} "
                  f"{kept / worker:7.1%}", flush=True)


if __name__ == "__main__":
    main()
