#!/usr/bin/python3
"""Restart latency (issue 12): from a worker's death (SIGKILL) to every worker of the next attempt
running, for the C Fashion-MNIST example (examples/fashion_mnist) with 4 workers on a local
cluster (PostgreSQL, one trainyard-server, one trainyard-agent, via bench/launch_cluster.py).

The job runs with max_failures -1 and a checkpoint every (small) epoch. Each round waits until
the current attempt is RUNNING and has committed a checkpoint, kills one random rank with
SIGKILL and reads the job's events (server clock, same host as the kill) to split the time:

  detect   kill → "restarting after failure" (the agent saw the exit, the server fired retry)
  drain    → "attempt N ended" (the surviving ranks were stopped and exited)
  place    → STARTING of attempt N+1 (scheduling pass, placement, resume point chosen)
  launch   → RUNNING of attempt N+1 (launch message, checkpoint handed over, every worker started)
  total    kill → RUNNING of attempt N+1: the headline figure

The restarted attempt resumes from the checkpoint its node holds (one node: the agent hands over
its own copy, no fetch). Prints the figures in milliseconds. Not a test: it asserts nothing.

    /usr/bin/python3 bench/restart_latency.py --build build --rounds 10
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

PHASES = ("detect", "drain", "place", "launch", "total")


def job_spec(root, build, workers):
    with open(os.path.join(root, "examples/fashion_mnist/job.json")) as f:
        spec = json.load(f)
    spec["name"] = "restart-latency"
    spec["entrypoint"] = [os.path.join(build, "examples/fashion_mnist/fashion_mnist")]
    spec["working_dir"] = root
    spec["scaling_config"]["num_workers"] = workers
    spec["train_loop_config"].update({"epochs": 100000, "limit_train": 3000, "limit_test": 500,
                                      "checkpoint_every": 1, "min_accuracy": 0})
    spec["run_config"]["checkpoint_config"] = {"num_to_keep": 2}
    spec["run_config"]["failure_config"] = {"max_failures": -1}
    spec["timeout_s"] = None
    return spec


def get(server, path):
    r = server.request("GET", path)
    if r.status != 200:
        raise RuntimeError(f"GET {path}: {r.status} {r.body!r}")
    return r.json


def wait_running_with_checkpoint(server, job, attempt, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        j = get(server, f"/api/v1/jobs/{job}")
        if j["status"] in ("FAILED", "STOPPED", "SUCCEEDED"):
            raise RuntimeError(f"job ended: {j}")
        if j["status"] == "RUNNING" and j["attempt"] == attempt:
            cks = get(server, f"/api/v1/jobs/{job}/checkpoints")["checkpoints"]
            if any(c["attempt"] == attempt for c in cks):
                return
        time.sleep(0.05)
    raise RuntimeError(f"attempt {attempt} not running with a checkpoint after {timeout} s")


def round_phases(server, job, attempt, killed_at, timeout=120):
    """Waits for attempt+1 to run; returns the phase durations (seconds)."""
    deadline = time.time() + timeout
    marks = {}
    while time.time() < deadline and "launch" not in marks:
        for e in get(server, f"/api/v1/jobs/{job}/events")["events"]:
            at, msg = lc.parse_ts(e["at"]), e["message"] or ""
            if e["attempt"] == attempt and msg.startswith("restarting after failure"):
                marks.setdefault("detect", at)
            elif e["attempt"] == attempt and msg.startswith(f"attempt {attempt} ended"):
                marks.setdefault("drain", at)
            elif e["attempt"] == attempt + 1 and e["status"] == "STARTING":
                marks.setdefault("place", at)
            elif e["attempt"] == attempt + 1 and e["status"] == "RUNNING":
                marks.setdefault("launch", at)
        time.sleep(0.05)
    if len(marks) < 4:
        raise RuntimeError(f"attempt {attempt + 1} not running after {timeout} s: {marks}")
    out, prev = {}, killed_at
    for p in PHASES[:-1]:
        out[p] = marks[p] - prev
        prev = marks[p]
    out["total"] = marks["launch"] - killed_at
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.environ.get("TY_BUILD_DIR", os.path.join(lc.ROOT, "build")))
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--db", choices=("embedded", "external"), default="external")
    ap.add_argument("--json", help="also write every sample to this file")
    args = ap.parse_args()
    lc.use_build(args.build)
    rng = random.Random(1)
    samples = []
    with lc.Cluster(db=args.db, agent_cpus=args.workers) as c:
        job = c.server.submit(job_spec(lc.ROOT, os.path.abspath(args.build), args.workers))["id"]
        for attempt in range(1, args.rounds + 1):
            wait_running_with_checkpoint(c.server, job, attempt)
            workers = get(c.server, f"/api/v1/jobs/{job}/workers")["workers"]
            live = [w for w in workers if w["attempt"] == attempt and w["status"] == "RUNNING"]
            victim = rng.choice(live)
            killed_at = time.time()
            os.kill(victim["pid"], signal.SIGKILL)
            s = round_phases(c.server, job, attempt, killed_at)
            s["rank"] = victim["rank"]
            samples.append(s)
            print(f"# attempt {attempt}: killed rank {s['rank']}: " +
                  " ".join(f"{p} {s[p] * 1e3:.0f}" for p in PHASES), flush=True)
        c.server.request("POST", f"/api/v1/jobs/{job}/stop")
        c.server.wait_job(job, {"STOPPED", "FAILED"}, timeout=60)
    print(f"# {lc.machine_caveats()}")
    print(f"# {args.workers} workers, {len(samples)} restarts, milliseconds (server event clock)")
    lc.print_phases(samples, PHASES, args.json)


if __name__ == "__main__":
    main()
