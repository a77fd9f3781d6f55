#!/usr/bin/python3
"""Submit → all workers running through Slurm (--slurm), against sbatch → RUNNING of an
equivalent allocation alone, in the same run (issue 28; goal: Trainyard adds <= 0.3 s).

Starts a throwaway Slurm (scripts/slurm-local.sh, 2 emulated nodes), PostgreSQL and one
trainyard-server --slurm (tests/integration/harness.py, build in ./build), then alternates:

  sbatch     `sbatch -N2 --ntasks-per-node=1` of a script that runs `srun sleep` on both nodes:
             from just before sbatch to the first squeue that says RUNNING.
  trainyard  POST /api/v1/jobs of a 2-worker job (one per node): from just before the POST to
             the first GET that says RUNNING (every worker started: its agent, in the
             allocation, forked it and the server recorded it).

Both are polled every --poll-ms. Prints the median and each sample (seconds). Not a test.

Slurm starts a job it is given at its next scheduling pass, up to a second later: slurmctld's
passes come once a second at a fixed phase of the wall clock (measured: every start at
hh:mm:ss.03-.05 in one run, whatever the submission time), for sbatch and Trainyard alike. So
both sides of a round submit at the same phase of the second (chosen at random per round,
--seed): each then waits the same for Slurm's pass, and the rounds sample that wait uniformly.
The bench also prints the samples less that wait, each job's own, read from slurmctld's log
(submitted -> "Started" or "Allocate", ms): the "paired" figure is Trainyard's median less
sbatch's, both without it.
--steps also prints the server's log lines that time each Trainyard round's steps ("Slurm job N
submitted", "node ... registered", "workers placed"; the server runs with --debug
control,hub,http,store), the job's events, the last GETs of each round with their durations,
and the agents' and Slurm's log lines, to see where the time goes.

    /usr/bin/python3 bench/slurm_submit.py --rounds 5 [--steps]
"""
import argparse
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
os.environ.setdefault("TY_BUILD_DIR", os.path.join(ROOT, "build"))
os.environ.setdefault("TY_SOURCE_DIR", ROOT)
import harness  # noqa: E402


def wait(pred, poll, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(poll)
    raise RuntimeError("timed out")


def at_phase(phi):
    """Sleeps until the wall clock's fraction of a second is phi."""
    time.sleep((phi - time.time() % 1) % 1)


def slurm_waits(log_path):
    """{slurm job id: seconds from its submission to its start}, from slurmctld's log."""
    def secs(stamp):
        h, m, sec = stamp.split("T")[1].split(":")
        return int(h) * 3600 + int(m) * 60 + float(sec)
    sub, start = {}, {}
    with open(log_path, errors="replace") as f:
        for line in f:
            m = re.match(r"\[([^\]]+)\] (.*)", line)
            if not m:
                continue
            j = re.search(r"_slurm_rpc_submit_batch_job: JobId=(\d+)", m.group(2))
            if j:
                sub[j.group(1)] = secs(m.group(1))
            j = re.search(r"(?:Started|Allocate) JobId=(\d+)", m.group(2))
            if j and j.group(1) not in start:
                start[j.group(1)] = secs(m.group(1))
    return {k: start[k] - sub[k] for k in sub if k in start}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--poll-ms", type=float, default=20)
    ap.add_argument("--steps", action="store_true", help="print the server's step log lines")
    ap.add_argument("--seed", type=int, default=1, help="of the rounds' submission phases")
    args = ap.parse_args()
    phases = random.Random(args.seed)
    poll = args.poll_ms / 1000
    root = harness.make_tmpdir("ty-bench-slurm-")
    subprocess.run([os.path.join(ROOT, "scripts", "slurm-local.sh"), "start", root, "2"],
                   check=True)
    env = dict(os.environ, SLURM_CONF=os.path.join(root, "slurm.conf"))
    pg = harness.PostgresCluster().start()
    srv = None
    try:
        extra = ["--slurm", f"unix:{root}/slurmrestd.sock"]
        if args.steps:
            extra += ["--log-level", "debug", "--debug", "control,hub,http,store"]
            # The agents through a wrapper that logs when Slurm started them, and their log.
            wrap = os.path.join(root, "agent.sh")
            with open(wrap, "w") as f:
                f.write(f"#!/bin/sh\nexec 2>>{root}/log/agent-$SLURMD_NODENAME.log\n"
                        "echo \"$(date -u +%H:%M:%S.%3N) Slurm job $SLURM_JOB_ID: agent "
                        f"exec\" >&2\nexec {harness.AGENT_BIN}\n")
            os.chmod(wrap, 0o755)
            extra += ["--slurm-agent-path", wrap]
        srv = harness.Server(database_url=pg.url(pg.create_database()), auth="none",
                             env={"TRAINYARD_AGENT_RUN_AS": "none",
                                  "TRAINYARD_AGENT_PORT_RANGE": harness.port_range()},
                             extra_args=extra).start()
        plain, ours, plain_ids, our_ids = [], [], [], []
        for _ in range(args.rounds):
            phi = phases.random()
            at_phase(phi)
            t0 = time.time()
            out = subprocess.run(["sbatch", "--parsable", "-N2", "--ntasks-per-node=1",
                                  "-o", "/dev/null", "--wrap", "srun sleep 5"], env=env,
                                 capture_output=True, text=True, check=True).stdout
            sid = out.strip().split(";")[0]
            plain_ids.append(sid)
            wait(lambda: subprocess.run(["squeue", "-h", "-j", sid, "-o", "%T"], env=env,
                                        capture_output=True, text=True).stdout.strip()
                 == "RUNNING", poll)
            plain.append(time.time() - t0)
            subprocess.run(["scancel", sid], env=env)
            wait(lambda: subprocess.run(["squeue", "-h", "-t", "R,PD,CG", "-o", "%i"], env=env,
                                        capture_output=True, text=True).stdout.strip() == "",
                 0.05)
            at_phase(phi)
            t0 = time.time()
            if args.steps:
                print(f"POST at {time.strftime('%H:%M:%S', time.gmtime(t0))}"
                      f".{int(t0 * 1000) % 1000:03d}Z")
            job = srv.submit({"name": "bench", "entrypoint": ["sleep", "5"],
                              "scaling_config": {"num_workers": 2}}, token=None)["id"]
            polls = []

            def running():
                a = time.time()
                st = srv.request("GET", f"/api/v1/jobs/{job}", token=None).json["status"]
                polls.append((a, time.time() - a, st))
                return st == "RUNNING"
            wait(running, poll)
            if args.steps:
                for a, d, st in polls[-8:]:
                    print(f"  GET at {time.strftime('%H:%M:%S', time.gmtime(a))}"
                          f".{int(a * 1000) % 1000:03d} took {d * 1000:.0f} ms: {st}")
            ours.append(time.time() - t0)
            for e in srv.request("GET", f"/api/v1/jobs/{job}/events", token=None).json.get(
                    "events", []):
                m = re.search(r"Slurm job (\d+) submitted", e.get("message") or "")
                if m:
                    our_ids.append(m.group(1))
                    break
            if args.steps:
                t1 = time.time()
                print(f"RUNNING seen at {time.strftime('%H:%M:%S', time.gmtime(t1))}"
                      f".{int(t1 * 1000) % 1000:03d}Z")
                for e in srv.request("GET", f"/api/v1/jobs/{job}/events", token=None).json.get(
                        "events", []):
                    print(f"  event {e.get('time') or e.get('at')}: {e.get('message') or e}")
            srv.request("POST", f"/api/v1/jobs/{job}/stop", token=None)
            srv.wait_job(job, {"STOPPED"}, timeout=60)
            wait(lambda: subprocess.run(["squeue", "-h", "-t", "R,PD,CG", "-o", "%i"], env=env,
                                        capture_output=True, text=True).stdout.strip() == "",
                 0.05)
        mp, mo = statistics.median(plain), statistics.median(ours)
        print(f"sbatch -> RUNNING          median {mp:.3f} s  {[round(x, 3) for x in plain]}")
        print(f"trainyard -> all running   median {mo:.3f} s  {[round(x, 3) for x in ours]}")
        print(f"added by Trainyard         {mo - mp:+.3f} s (goal <= 0.3 s)")
        waits = slurm_waits(os.path.join(root, "log", "slurmctld.log"))
        if len(our_ids) == len(ours) and all(i in waits for i in plain_ids + our_ids):
            pw = [t - waits[i] for t, i in zip(plain, plain_ids)]
            ow = [t - waits[i] for t, i in zip(ours, our_ids)]
            print(f"Slurm's wait for its pass  sbatch {[round(waits[i], 3) for i in plain_ids]}"
                  f"  trainyard {[round(waits[i], 3) for i in our_ids]}")
            print(f"sbatch less that wait      median {statistics.median(pw):.3f} s"
                  f"  {[round(x, 3) for x in pw]}")
            print(f"trainyard less that wait   median {statistics.median(ow):.3f} s"
                  f"  {[round(x, 3) for x in ow]}")
            print(f"added by Trainyard, paired "
                  f"{statistics.median(ow) - statistics.median(pw):+.3f} s (goal <= 0.3 s)")
        if args.steps:
            with open(srv.log_path) as f:
                for line in f:
                    if any(w in line for w in ("submitted", "registered", "placed", "POST")):
                        print(line.rstrip())
            # Slurm's side: allocation, batch launch, the srun step, its tasks; the agents'.
            for name in sorted(os.listdir(os.path.join(root, "log"))):
                with open(os.path.join(root, "log", name), errors="replace") as f:
                    for line in f:
                        if any(w in line for w in (
                                "Allocate JobId", "batch_launch", "Launching batch",
                                "step_create", "launch task", "agent exec", "trainyard-agent",
                                "registered", "launch", "started")):
                            print(f"{name}: {line.rstrip()}")
    finally:
        if srv:
            srv.stop()
        pg.stop()
        subprocess.run([os.path.join(ROOT, "scripts", "slurm-local.sh"), "stop", root])
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
