#!/usr/bin/python3
"""Time to the first training step (issue 27): from submitting a 2-worker torch DDP job (gloo, a
tiny model) to rank 0's first optimizer step, beside the same script started by hand (two
processes, MASTER_ADDR/MASTER_PORT, RANK, WORLD_SIZE) in the same run, alternating, several
repetitions. The cluster is local (PostgreSQL, one trainyard-server, one trainyard-agent via
bench/launch_cluster.py); the agent keeps --warm N interpreters with torch imported (0: every
worker starts cold). Rank 0 prints the wall-clock time of its first step; both sides are timed
from the moment just before the submit (or the first Popen) to that time. Between repetitions the
bench waits --gap seconds, so that the pool is full again. Not a test: it asserts nothing.

    /usr/bin/python3 bench/first_step.py --build build --reps 7 [--warm 2]

Last line: `first step p50: trainyard X s, by hand Y s, ratio R` (goal: R <= 0.5).
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_cluster as lc  # noqa: E402

PY = "/usr/bin/python3"

SCRIPT = """
import os, time
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 16), torch.randn(8, 4)
opt.zero_grad()
torch.nn.functional.mse_loss(model(x), y).backward()
opt.step()
if dist.get_rank() == 0:
    print("FIRST_STEP %.6f" % time.time(), flush=True)
dist.barrier()
dist.destroy_process_group()
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def first_step_in(text):
    for line in text.splitlines():
        if line.startswith("FIRST_STEP "):
            return float(line.split()[1])
    return None


def by_hand(script):
    port = free_port()
    t0 = time.time()
    procs = []
    for rank in range(2):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                   WORLD_SIZE="2", LOCAL_RANK=str(rank))
        procs.append(subprocess.Popen([PY, script], env=env, stdout=subprocess.PIPE, text=True))
    out = [p.communicate(timeout=600)[0] for p in procs]
    if any(p.returncode != 0 for p in procs):
        raise RuntimeError(f"by hand: exit codes {[p.returncode for p in procs]}")
    return first_step_in(out[0]) - t0


def by_trainyard(c, script, workdir):
    spec = {"name": "first-step", "entrypoint": [PY, script], "working_dir": workdir,
            "backend": "torch", "scaling_config": {"num_workers": 2}}
    t0 = time.time()
    job = c.server.submit(spec)["id"]
    log = os.path.join(c.agent.data_dir, "logs", str(job), "1", "rank-0.log")
    deadline = t0 + 600
    while time.time() < deadline:
        try:
            with open(log) as f:
                at = first_step_in(f.read())
        except OSError:
            at = None
        if at is not None:
            break
        time.sleep(0.002)
    else:
        raise RuntimeError(f"job {job}: no first step in 600 s")
    done = c.server.wait_job(job, {"SUCCEEDED", "FAILED"}, timeout=600)
    if done["status"] != "SUCCEEDED":
        raise RuntimeError(f"job {job}: {done['status']}")
    return at - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.environ.get("TY_BUILD_DIR", os.path.join(lc.ROOT, "build")))
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--warm", type=int, default=2, help="--warm-python of the agent (0: cold)")
    ap.add_argument("--gap", type=float, default=4.0, help="seconds between repetitions")
    ap.add_argument("--db", choices=("embedded", "external"), default="external")
    args = ap.parse_args()
    lc.use_build(args.build)
    workdir = tempfile.mkdtemp(prefix="ty-first-step-")
    os.chmod(workdir, 0o755)
    script = os.path.join(workdir, "ddp_first_step.py")
    with open(script, "w") as f:
        f.write(SCRIPT)
    os.chmod(script, 0o644)
    agent_args = ["--warm-python", str(args.warm), "--warm-frameworks", "torch",
                  "--warm-python-exe", PY]
    ty, hand = [], []
    with lc.Cluster(db=args.db, agent_cpus=2, agent_args=agent_args) as c:
        c.agent.wait_node()
        time.sleep(args.gap)
        for rep in range(args.reps):
            ty.append(by_trainyard(c, script, workdir))
            time.sleep(args.gap)
            hand.append(by_hand(script))
            time.sleep(args.gap)
            print(f"# rep {rep + 1}: trainyard {ty[-1]:.3f} s, by hand {hand[-1]:.3f} s",
                  flush=True)
    print(f"# {lc.machine_caveats()}")
    print(f"# 2 workers, torch DDP (gloo), agent --warm-python {args.warm}, {args.reps} reps")
    x, y = statistics.median(ty), statistics.median(hand)
    print(f"first step p50: trainyard {x:.3f} s, by hand {y:.3f} s, ratio {x / y:.2f}")


if __name__ == "__main__":
    main()
