#!/usr/bin/python3
"""trainyard.train fit() overhead (issue 15). Not a test: prints figures (docs/python-api.md).

  ratio      the same 2-worker training function (fixed CPU work, a report per epoch) run
             (a) by hand: two `python3 -m trainyard.train._runner` processes with torchrun-style
                 environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK,
                 MASTER_ADDR, MASTER_PORT), wall = first spawn -> both reaped;
             (b) by DataParallelTrainer.fit() against a server and agent already up (as a
                 service is), wall = fit() called -> fit() returned (packing, the upload check,
                 scheduling, launch, log/metric polling and the Result included);
             alternating, --pairs times; the ratio of each pair is b / a. On a busy machine the
             workers' own run time varies more than the whole overhead, so the script also
             prints fit()'s time outside its workers (wall minus first worker start -> last
             worker exit, from the server's records) and the ratio that gives against the
             median by-hand time.
  first      fit() -> the first rank-0 report's server time, for a short function, with the
             working directory unchanged since the last fit() (cached: not uploaded, not
             fetched again) and with one file changed each time (fresh: packed, uploaded,
             fetched and unpacked by the node).

  /usr/bin/python3 bench/fit_overhead.py [--build DIR] [--pairs 5] [--work 6e6] [--payload-mb 4]
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_cluster as lc  # noqa: E402

PYTHON = "/usr/bin/python3"
WORK = """\
import hashlib
import trainyard.train as train


def train_func(config):
    h = hashlib.sha256()
    block = b"x" * 64
    for epoch in range(config["epochs"]):
        for _ in range(int(config["work"]) // config["epochs"]):
            h.update(block)
        train.report({"epoch": epoch, "digest": int(h.hexdigest()[:8], 16)})
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def by_hand(workdir, config):
    ref = json.dumps({"module": "work", "qualname": "train_func", "backend": "none",
                      "name": "by-hand"})
    port = free_port()
    env_base = dict(os.environ, PYTHONPATH=os.path.join(lc.ROOT, "worker", "python"),
                    WORLD_SIZE="2", LOCAL_WORLD_SIZE="2", NODE_RANK="0",
                    MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                    TRAINYARD_CONFIG=json.dumps(config), TRAINYARD_JOB_ID="by-hand")
    start = time.monotonic()
    procs = [subprocess.Popen([PYTHON, "-m", "trainyard.train._runner", ref], cwd=workdir,
                              env=dict(env_base, RANK=str(r), LOCAL_RANK=str(r)),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for r in range(2)]
    codes = [p.wait() for p in procs]
    wall = time.monotonic() - start
    if any(codes):
        raise SystemExit(f"by hand: exit codes {codes}")
    return wall


def with_fit(train, client, workdir, config):
    import work
    trainer = train.DataParallelTrainer(
        work.train_func, train_loop_config=config,
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(name="fit-bench", verbose=0), working_dir=workdir,
        client=client, worker_python=PYTHON)
    start = time.monotonic()
    wall_start = time.time()
    result = trainer.fit()
    wall = time.monotonic() - start
    points = [p for p in client.get_metrics(result.job_id, rank=0) if p["name"] == "epoch"]
    first = min(lc.parse_ts(p["time"]) for p in points) - wall_start
    ws = client.get_workers(result.job_id)
    workers = (max(lc.parse_ts(w["finished_at"]) for w in ws) -
               min(lc.parse_ts(w["started_at"]) for w in ws))
    return wall, first, wall - workers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=lc.default_build())
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--work", type=float, default=6e6, help="sha256 blocks per worker")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--first-runs", type=int, default=5)
    ap.add_argument("--payload-mb", type=float, default=4.0,
                    help="extra files in the working directory (as a repository has)")
    args = ap.parse_args()
    lc.use_build(args.build)
    sys.path.insert(0, os.path.join(lc.ROOT, "worker", "python"))
    import trainyard.train as train

    workdir = tempfile.mkdtemp(prefix="fit-bench-")
    with open(os.path.join(workdir, "work.py"), "w") as f:
        f.write(WORK)
    os.makedirs(os.path.join(workdir, "data"))
    for i in range(max(1, int(args.payload_mb))):
        with open(os.path.join(workdir, "data", f"blob{i}.bin"), "wb") as f:
            f.write(os.urandom(int(min(args.payload_mb, 1.0) * (1 << 20))))
    sys.path.insert(0, workdir)
    config = {"work": args.work, "epochs": args.epochs}
    with lc.Cluster(db="external", agent_cpus=2) as cl:
        client = train.Client(cl.server.url, cl.server.admin_token)
        with_fit(train, client, workdir, {"work": 1000, "epochs": 1})  # warm: upload, fetch
        pairs = []
        for i in range(args.pairs):
            a = by_hand(workdir, config)
            b, _, fixed = with_fit(train, client, workdir, config)
            pairs.append((a, b, b / a, fixed))
            print(f"pair {i + 1}: by hand {a:.3f} s  fit() {b:.3f} s  ratio {b / a:.4f}  "
                  f"fit() outside its workers {fixed:.3f} s", flush=True)
        short = {"work": 1000, "epochs": 1}
        cached, fresh = [], []
        for i in range(args.first_runs):
            cached.append(with_fit(train, client, workdir, short)[1])
            with open(os.path.join(workdir, "changed.txt"), "w") as f:
                f.write(f"{time.time()} {i}")
            fresh.append(with_fit(train, client, workdir, short)[1])
    ratios = [p[2] for p in pairs]
    fixed = statistics.median(p[3] for p in pairs)
    by_hand_median = statistics.median(p[0] for p in pairs)
    print(json.dumps({
        "fit_outside_workers_median_s": fixed,
        "ratio_if_workers_ran_alike": (by_hand_median + fixed) / by_hand_median,
        "pairs": args.pairs, "work": args.work, "payload_mb": args.payload_mb,
        "ratio_median": statistics.median(ratios), "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "by_hand_median_s": statistics.median(p[0] for p in pairs),
        "fit_median_s": statistics.median(p[1] for p in pairs),
        "first_report_cached_median_s": statistics.median(cached),
        "first_report_fresh_median_s": statistics.median(fresh),
        "first_report_cached": cached, "first_report_fresh": fresh}, indent=1))


if __name__ == "__main__":
    main()
