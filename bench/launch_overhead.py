#!/usr/bin/python3
"""Trainyard's overhead on a real training run: the same PyTorch DDP script
(examples/torch_fashion_mnist/train.py, 2 workers, gloo) launched by hand with torch's env://
variables vs submitted to Trainyard (server + agent already up, as a service is), alternating,
side by side in one run. Called by bench/launch_overhead.sh; prints the figures. Not a test.

  by hand    two processes with RANK, WORLD_SIZE=2, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK,
             MASTER_ADDR=127.0.0.1, MASTER_PORT (free), and PYTHONPATH=worker/python (so
             trainyard.report() exists and prints to stderr, and rank 0 saves the same
             checkpoint file each epoch); wall = just before the first spawn → both reaped.
  trainyard  POST /api/v1/jobs with the same config in train_loop_config; wall = just before the
             POST → the SUCCEEDED event's time (server clock = this clock: no polling noise).
             Its reports go to the agent and its checkpoints are uploaded to the server.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_cluster as lc  # noqa: E402
import launch_latency as ll  # noqa: E402

PYTHON = "/usr/bin/python3"
SCRIPT = os.path.join(lc.ROOT, "examples", "torch_fashion_mnist", "train.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(argv, times_file):
    """argv under /usr/bin/time, appending "<elapsed> <user> <sys>" per process to times_file
    (used identically in both arms, so it costs both the same)."""
    if times_file is None:
        return argv
    return ["/usr/bin/time", "-f", "%e %U %S", "-a", "-o", times_file, *argv]


def cpu_seconds(times_file):
    """Sum of user + system CPU seconds of the processes recorded in times_file."""
    if times_file is None or not os.path.exists(times_file):
        return float("nan")
    total = 0.0
    with open(times_file) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3:
                total += float(parts[1]) + float(parts[2])
    return total


def epoch_seconds(log_path):
    """Sum of the script's own epoch_time_s (its training loop + evaluation, timed inside the
    process) from rank 0's log; NaN when absent."""
    try:
        text = open(log_path, errors="replace").read()
    except OSError:
        return float("nan")
    total, found = 0.0, False
    for line in text.splitlines():
        if line.startswith("{") and '"epoch_time_s"' in line:
            try:
                total += json.loads(line)["epoch_time_s"]
                found = True
            except (ValueError, KeyError):
                pass
    return total if found else float("nan")


def by_hand(cfg, workers, logdir, rep, times_file=None):
    port = free_port()
    flags = []
    for k, v in cfg.items():
        flags += [f"--{k.replace('_', '-')}", str(v)]
    procs = []
    t0 = time.time()
    for r in range(workers):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(workers), LOCAL_RANK=str(r),
                   LOCAL_WORLD_SIZE=str(workers), NODE_RANK="0", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port),
                   PYTHONPATH=os.path.join(lc.ROOT, "worker", "python"))
        for k in ("TRAINYARD_JOB_ID", "TRAINYARD_CONFIG", "TRAINYARD_REPORT_SOCKET"):
            env.pop(k, None)
        log = open(os.path.join(logdir, f"hand-{rep}-rank{r}.log"), "wb")
        procs.append((subprocess.Popen(timed([PYTHON, SCRIPT, *flags], times_file), env=env, cwd=lc.ROOT,
                                       stdout=log, stderr=subprocess.STDOUT), log))
    codes = []
    for p, log in procs:
        codes.append(p.wait())
        log.close()
    wall = time.time() - t0
    if any(codes):
        raise RuntimeError(f"by-hand run {rep} failed: exit codes {codes}; logs in {logdir}")
    return wall, cpu_seconds(times_file), epoch_seconds(
        os.path.join(logdir, f"hand-{rep}-rank0.log"))


def through_trainyard(client, cfg, workers, rep, times_file=None, agent_data=None):
    spec = {"name": f"overhead-{rep}", "entrypoint": timed([PYTHON, SCRIPT], times_file),
            "working_dir": lc.ROOT,
            "backend": "torch", "train_loop_config": cfg,
            "scaling_config": {"num_workers": workers, "resources_per_worker": {"CPU": 1}},
            "timeout_s": 1800}
    t0 = time.time()
    status, body = client.request("POST", "/api/v1/jobs", spec)
    assert status == 201, body
    job_id = body["id"]
    job = ll.wait_terminal(client, job_id, poll_s=0.05, timeout=1800)
    if job["status"] != "SUCCEEDED":
        raise RuntimeError(f"job {job_id} ended {job['status']}: {job}")
    ev = ll.events_of(client, job_id)
    ep = epoch_seconds(os.path.join(agent_data, "logs", str(job_id), "1", "rank-0.log")) \
        if agent_data else float("nan")
    return ev["SUCCEEDED"] - t0, (ev["RUNNING"] - t0), cpu_seconds(times_file), ep


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=lc.default_build())
    ap.add_argument("--db", choices=("embedded", "external"), default="embedded")
    ap.add_argument("--reps", type=int, default=5, help="repetitions of each (≥ 3)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--config", default='{"epochs": 1, "limit_train": 20000}',
                    help="train_loop_config (JSON); by hand passed as flags")
    ap.add_argument("--no-cpu-time", action="store_true",
                    help="do not wrap the workers in /usr/bin/time (no CPU-time figures)")
    ap.add_argument("--warmup", type=int, default=1,
                    help="untimed runs of each first (page cache, torch import)")
    args = ap.parse_args()
    lc.use_build(args.build)
    cfg = json.loads(args.config)
    print(f"# launch_overhead: {args.workers} workers, config {cfg}, {args.reps} reps each, "
          f"alternating; build {args.build}, db {args.db}")
    print(f"# machine: {lc.machine_caveats()}")
    logdir = lc.import_harness().make_tmpdir("ty-overhead-")
    hand, ty, ty_run, pairs, cpu_pairs = [], [], [], [], []
    svc_hand, svc_ty, loop_hand, loop_ty = [], [], [], []

    def tf(kind, rep):
        return None if args.no_cpu_time else os.path.join(logdir, f"{kind}-{rep}.times")

    with lc.Cluster(db=args.db, agent_cpus=max(2, args.workers)) as cl:
        client = ll.Client(cl.server)
        adata = cl.agent.data_dir
        for i in range(args.warmup):
            by_hand(cfg, args.workers, logdir, f"warmup{i}")
            through_trainyard(client, cfg, args.workers, f"warmup{i}", agent_data=adata)
        print(f"\n  {'rep':>3} {'order':<9} {'by hand s':>10} {'trainyard s':>12} "
              f"{'ratio':>7} {'cpu hand s':>11} {'cpu ty s':>9} {'cpu ratio':>9} "
              f"{'svc cpu hand s':>14} {'svc cpu ty s':>12} {'loop hand s':>11} {'loop ty s':>9} "
              f"{'submit→running ms':>18}")

        def hand_run(rep):
            s0 = lc.service_cpu(cl)
            h, hc, he = by_hand(cfg, args.workers, logdir, rep, tf("hand", rep))
            loop_hand.append(he)
            return h, hc, lc.service_cpu(cl) - s0

        def ty_run_(rep):
            s0 = lc.service_cpu(cl)
            t, run, tc, te = through_trainyard(client, cfg, args.workers, rep, tf("ty", rep),
                                               agent_data=adata)
            loop_ty.append(te)
            return t, run, tc, lc.service_cpu(cl) - s0

        for rep in range(args.reps):
            # Alternate which goes first, so that drift in the machine's load hits both.
            if rep % 2 == 0:
                h, hc, hs = hand_run(rep)
                t, run, tc, ts = ty_run_(rep)
                order = "hand, ty"
            else:
                t, run, tc, ts = ty_run_(rep)
                h, hc, hs = hand_run(rep)
                order = "ty, hand"
            svc_hand.append(hs)
            svc_ty.append(ts)
            hand.append(h)
            ty.append(t)
            ty_run.append(run)
            pairs.append(t / h)
            cpu_pairs.append(tc / hc)
            print(f"  {rep:>3} {order:<9} {h:>10.3f} {t:>12.3f} {t / h:>7.3f} {hc:>11.2f} "
                  f"{tc:>9.2f} {tc / hc:>9.3f} {hs:>14.2f} {ts:>12.2f} {loop_hand[-1]:>11.3f} {loop_ty[-1]:>9.3f} "
                  f"{run * 1e3:>18.1f}", flush=True)
        agent_log = cl.agent.log_path
    ratios = sorted(pairs)
    print(f"\n  by hand   s: mean {statistics.fmean(hand):.3f}  median {statistics.median(hand):.3f}"
          f"  min {min(hand):.3f}  max {max(hand):.3f}  stdev "
          f"{statistics.stdev(hand) if len(hand) > 1 else 0:.3f}")
    print(f"  trainyard s: mean {statistics.fmean(ty):.3f}  median {statistics.median(ty):.3f}"
          f"  min {min(ty):.3f}  max {max(ty):.3f}  stdev "
          f"{statistics.stdev(ty) if len(ty) > 1 else 0:.3f}")
    print(f"  ratio trainyard/by hand, per pair: median {statistics.median(ratios):.3f}, "
          f"min {ratios[0]:.3f}, max {ratios[-1]:.3f}; ratio of means "
          f"{statistics.fmean(ty) / statistics.fmean(hand):.3f}; ratio of minimums "
          f"{min(ty) / min(hand):.3f}")
    if not args.no_cpu_time:
        c = sorted(cpu_pairs)
        print(f"  CPU-time ratio (user+sys of the workers), per pair: median "
              f"{statistics.median(c):.3f}, min {c[0]:.3f}, max {c[-1]:.3f}")
    lr = sorted(b / a for a, b in zip(loop_hand, loop_ty))
    print(f"  in-script epoch time (rank 0's epoch_time_s): by hand median "
          f"{statistics.median(loop_hand):.3f} s, through Trainyard median "
          f"{statistics.median(loop_ty):.3f} s; per-pair ratio median {statistics.median(lr):.3f}"
          f" (min {lr[0]:.3f}, max {lr[-1]:.3f})")
    print(f"  server + agent + PostgreSQL CPU during a run: by hand (idle service) median "
          f"{statistics.median(svc_hand):.2f} s, through Trainyard median "
          f"{statistics.median(svc_ty):.2f} s")
    print(f"  trainyard submit → all workers running: median "
          f"{statistics.median(ty_run) * 1e3:.1f} ms")
    print(f"# logs: {logdir} (by hand), {agent_log} (agent)")
    print(f"# machine after: {lc.machine_caveats()}")


if __name__ == "__main__":
    main()
