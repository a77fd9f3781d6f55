#!/usr/bin/python3
"""Node loss (issue 23, point 4): from SIGKILL of a node's agent and its workers to the job's next
attempt RUNNING on the remaining capacity, on a local cluster (PostgreSQL, one trainyard-server,
two trainyard-agents of one CPU each, via bench/launch_cluster.py and the test harness).

Each round submits an elastic job (num_workers {"min": 1, "max": 2}, max_failures 1) of the C
SDK's test worker (tests/integration/progs/collective_loop.c: allreduces, 20 ms apart), one rank
per node; once it runs, kills node B's agent, its workers' process groups and their supervisors
with SIGKILL, and reads the job's events (server clock, same host as the kill) to split the time:

  detect   kill -> "restarting after failure" (the surviving rank's allreduce failed, it exited)
  drop     -> "node B: its agent is disconnected ..." (B's workers counted as lost)
  place    -> STARTING of attempt 2 (its workers gone, scheduling pass, placement)
  launch   -> RUNNING of attempt 2 (launch message, the worker started)
  total    kill -> RUNNING of attempt 2: the headline figure (issue 23's goal: <= 3 s)

The server's --heartbeat-timeout-s is 60: without the early drop the restart would wait for it.
B's agent is started again between rounds. Prints the figures in milliseconds; not a test.

    /usr/bin/python3 bench/node_loss.py --build build --rounds 5
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_cluster as lc  # noqa: E402

PHASES = ("detect", "drop", "place", "launch", "total")


def get(server, path):
    r = server.request("GET", path)
    if r.status != 200:
        raise RuntimeError(f"GET {path}: {r.status} {r.body!r}")
    return r.json


def wait(what, fn, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(0.02)
    raise RuntimeError(f"{what}: not within {timeout} s")


def one_round(server, a, b, loop):
    job = server.submit({"name": "node-loss", "entrypoint": [loop, "1000000", "20"],
                         "backend": "native",
                         "scaling_config": {"num_workers": {"min": 1, "max": 2}},
                         "run_config": {"failure_config": {"max_failures": 1}}})["id"]

    def running_on_both():
        j = get(server, f"/api/v1/jobs/{job}")
        if j["status"] != "RUNNING":
            return None
        ws = get(server, f"/api/v1/jobs/{job}/workers")["workers"]
        return ws if {w["node_id"] for w in ws} == {a.node_id, b.node_id} else None
    first = wait("attempt 1 running on both nodes", running_on_both)
    # killed mid-allreduce, once both ranks are connected: a rank killed before its peer reached
    # it leaves the peer waiting for the ring's timeout
    wait("both ranks past their first allreduce",
         lambda: all((w["progress"] or {}).get("coll_seq", 0) >= 2
                     for w in get(server, f"/api/v1/jobs/{job}/workers")["workers"]))
    killed_at = time.time()
    b.kill_node([w["pid"] for w in first if w["node_id"] == b.node_id])
    marks = {}

    def scan():
        for e in get(server, f"/api/v1/jobs/{job}/events")["events"]:
            at, msg = lc.parse_ts(e["at"]), e["message"] or ""
            if e["attempt"] == 1 and msg.startswith("restarting after failure"):
                marks.setdefault("detect", at)
            elif e["attempt"] == 1 and msg.startswith(f"node {b.node_id}: its agent is "
                                                      "disconnected"):
                marks.setdefault("drop", at)
            elif e["attempt"] == 2 and e["status"] == "STARTING":
                marks.setdefault("place", at)
            elif e["attempt"] == 2 and e["status"] == "RUNNING":
                marks.setdefault("launch", at)
        return "launch" in marks
    wait("attempt 2 running", scan)
    node_b = get(server, f"/api/v1/nodes/{b.node_id}")
    out, prev = {}, killed_at
    for p in PHASES[:-1]:
        at = marks.get(p, prev)
        out[p] = at - prev
        prev = at
    out["total"] = marks["launch"] - killed_at
    out["b_status"] = node_b["status"]
    server.request("POST", f"/api/v1/jobs/{job}/stop")
    server.wait_job(job, {"STOPPED", "FAILED", "SUCCEEDED"}, timeout=60)
    b.start()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.environ.get("TY_BUILD_DIR", os.path.join(lc.ROOT, "build")))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", help="also write every sample to this file")
    args = ap.parse_args()
    lc.use_build(args.build)
    loop = os.path.join(os.path.abspath(args.build), "tests", "progs", "ty_collective_loop")
    samples = []
    with lc.Cluster(db="external", server_args=["--heartbeat-timeout-s", "60"]) as c:
        h = c.h
        a = h.Agent(c.server, cpus=1).start()
        b = h.Agent(c.server, cpus=1).start()
        try:
            for i in range(args.rounds):
                s = one_round(c.server, a, b, loop)
                samples.append(s)
                print(f"# round {i + 1}: " + " ".join(f"{p} {s[p] * 1e3:.0f}" for p in PHASES) +
                      f" (node B {s['b_status']} meanwhile)", flush=True)
        finally:
            for ag in (b, a):
                if ag.proc and ag.proc.poll() is None:
                    ag.stop()
    print(f"# {lc.machine_caveats()}")
    print(f"# {len(samples)} node losses, --heartbeat-timeout-s 60, milliseconds "
          "(server event clock)")
    lc.print_phases(samples, PHASES, args.json)


if __name__ == "__main__":
    main()
