#!/usr/bin/python3
"""Failover: the leader server killed with SIGKILL → the next scheduling decision by the new one.

Each run starts, on a fresh database of one PostgreSQL cluster (tests/integration/harness.py,
fsync off), two trainyard-servers (the first leads) and one trainyard-agent that knows both and is
connected to the leader, with one job running on it. Then, at t0 (wall clock, just before the
kill), it sends SIGKILL to the leader and POSTs a one-worker job to the survivor at once, and
measures from t0:

  leader    the survivor's GET /api/v1/health says "leader" (polled every 10 ms)
  placed    the new job's STARTING event (server clock, same host): the new leader's first
            scheduling decision for it. The headline figure.
  running   the new job's RUNNING event: the agent reconnected to the survivor (its backoff
            starts at 0.2 s ± 50 %), registered, and started the worker
  and checks that the job that was running when the leader died finishes in its first attempt.

    /usr/bin/python3 bench/failover.py                 # 5 runs, ./build
    /usr/bin/python3 bench/failover.py --runs 10 --build build --json out.json

Prints min / median / max in milliseconds. Not a test.
"""
import argparse
import json
import os
import secrets
import signal
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_cluster as lc  # noqa: E402


def role(h, server):
    try:
        r = h.http("GET", server.url + "/api/v1/health", timeout=2)
    except OSError:
        return None
    return r.json.get("role") if r.status == 200 else None


def wait(pred, what, timeout=60, step=0.01):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(step)
    raise RuntimeError(f"{what}: not after {timeout}s")


def first_events(server, job):
    r = server.request("GET", f"/api/v1/jobs/{job}/events")
    first = {}
    for e in r.json["events"]:
        first.setdefault(e["status"], lc.parse_ts(e["at"]))
    return first


def one_run(h, pg):
    database = pg.url(pg.create_database())
    token = "tyc_" + secrets.token_hex(20)
    art = h.make_tmpdir("ty-fo-art-")
    servers = [h.Server(database_url=database, env={"TRAINYARD_CLUSTER_TOKEN": token},
                        extra_args=["--artifact-dir", art]) for _ in range(2)]
    leader, survivor = servers
    leader.start()
    wait(lambda: role(h, leader) == "leader", "first server leads")
    survivor.start()
    survivor.admin_token = leader.admin_token
    agent = h.Agent(leader, also=[survivor])
    agent.start(token=token)
    gate = os.path.join(h.make_tmpdir("ty-fo-gate-"), "go")
    running = survivor.submit({"entrypoint": ["/bin/sh", "-c",
                                              f"while [ ! -e {gate} ]; do sleep 0.1; done"],
                               "scaling_config": {"num_workers": 1}})["id"]
    survivor.wait_job(running, {"RUNNING"})
    try:
        t0 = time.time()
        leader.proc.send_signal(signal.SIGKILL)
        job = survivor.submit({"entrypoint": ["/bin/true"],
                               "scaling_config": {"num_workers": 1}})["id"]
        wait(lambda: role(h, survivor) == "leader", "survivor leads")
        t_leader = time.time()
        survivor.wait_job(job, {"SUCCEEDED", "FAILED", "STOPPED"})
        ev = first_events(survivor, job)
        open(gate, "w").close()
        done = survivor.wait_job(running, {"SUCCEEDED", "FAILED", "STOPPED"})
        attempts = survivor.request("GET", f"/api/v1/jobs/{running}/attempts").json["attempts"]
        kept = done["status"] == "SUCCEEDED" and len(attempts) == 1
        return {"leader": (t_leader - t0) * 1e3, "placed": (ev["STARTING"] - t0) * 1e3,
                "running": (ev["RUNNING"] - t0) * 1e3, "running_job_kept": kept}
    finally:
        leader.proc.wait()
        agent.stop()
        survivor.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--build", default=os.path.join(lc.ROOT, "build"))
    ap.add_argument("--json")
    a = ap.parse_args()
    lc.use_build(a.build)
    h = lc.import_harness()
    pg = h.PostgresCluster().start()
    samples = []
    try:
        for i in range(a.runs):
            s = one_run(h, pg)
            samples.append(s)
            print(f"run {i + 1}: leader {s['leader']:.0f} ms, placed {s['placed']:.0f} ms, "
                  f"running {s['running']:.0f} ms, running job kept: {s['running_job_kept']}",
                  flush=True)
    finally:
        pg.stop()
    print("\nfrom SIGKILL of the leader, ms    min  median     max")
    for key in ("leader", "placed", "running"):
        v = [s[key] for s in samples]
        print(f"  {key:<30} {min(v):7.0f} {statistics.median(v):7.0f} {max(v):7.0f}")
    kept = sum(s["running_job_kept"] for s in samples)
    print(f"running job finished in its first attempt: {kept}/{len(samples)}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(samples, f, indent=1)


if __name__ == "__main__":
    main()
