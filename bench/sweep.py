#!/usr/bin/python3
"""Sweeps: trials scheduled per second, and ASHA's decision latency (issue 25).

Starts PostgreSQL (harness-style), one trainyard-server and one trainyard-agent (--cpus N) on
this machine and submits one sweep of --trials one-worker trials of a trivial plain-Python
function: it reports acc = q * i for i = 1..4 (q uniform in [0, 1]), --pause seconds apart, so
that a trial is still running when ASHA (max_t 4, grace_period 1, reduction_factor 2: rungs at
t = 1 and 2) decides to stop it. max_concurrent_trials is N: the sweep fills the agent.

  trials/s  trials whose job started, over the seconds from the sweep's submission to the last
            trial's start (jobs.started_at: every worker running), and the same for trials
            finished (to the last trial's end)
  decision  for every trial ASHA stopped at a rung: from the report that completed the rung
            (reports.received_at, when the server committed it) to the stop's event
            (job_events.at), both on the server's clock. The goal is <= 100 ms at p99.

    /usr/bin/python3 bench/sweep.py --build build                   # 1,000 trials, 8 at a time
    /usr/bin/python3 bench/sweep.py --build build --trials 200 --cpus 4

Prints the figures; --json FILE also writes every sample. Not a test.
"""
import argparse
import json
import os
import sys
import textwrap
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_cluster as lc  # noqa: E402

TRIAL = textwrap.dedent("""
    import sys, time, trainyard
    q = float(trainyard.get_context().config["q"])
    for i in range(1, 5):
        trainyard.report({"acc": q * i})
        time.sleep(float(sys.argv[1]))
""")

# Per trial ASHA stopped at a rung: the stop's first event (STOPPING; STOPPED, with the same
# message, follows once the worker exited) minus the time the report it decided on was committed
# (the trial's cursor stays on that report: a stopped trial is read no more).
DECISIONS = """
SELECT st.trial_index, st.stopped_by,
       extract(epoch FROM min(e.at) - r.received_at) * 1000
  FROM sweep_trials st
  JOIN job_events e ON e.job_id = st.job_id AND e.message = st.stopped_by
  JOIN reports r ON r.job_id = st.job_id AND r.rank = 0 AND r.attempt = st.seen_attempt
                AND r.seq = st.seen_seq
 WHERE st.sweep_id = {sid} AND st.stopped_by LIKE 'ASHA rung %'
 GROUP BY st.trial_index, st.stopped_by, r.received_at
"""

RATES = """
SELECT extract(epoch FROM max(j.started_at) - s.created_at),
       extract(epoch FROM max(j.finished_at) - s.created_at),
       count(j.started_at), count(j.finished_at)
  FROM sweeps s JOIN jobs j ON j.sweep_id = s.id
 WHERE s.id = {sid} GROUP BY s.created_at
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.environ.get("TY_BUILD_DIR", os.path.join(lc.ROOT, "build")))
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--cpus", type=int, default=8, help="the agent's CPUs: trials at once")
    ap.add_argument("--pause", type=float, default=0.05, help="seconds between reports")
    ap.add_argument("--json", help="also write every sample to this file")
    args = ap.parse_args()
    lc.use_build(args.build)
    with lc.Cluster(db="external", agent_cpus=args.cpus) as c:
        work = c.h.make_tmpdir("ty-bench-sweep-")
        with open(os.path.join(work, "trial.py"), "w") as f:
            f.write(TRIAL)
        body = {"name": "bench", "job": {"entrypoint": ["/usr/bin/python3", "trial.py",
                                                        str(args.pause)], "working_dir": work},
                "param_space": {"q": {"uniform": [0, 1]}},
                "tune_config": {"metric": "acc", "mode": "max", "num_samples": args.trials,
                                "max_concurrent_trials": args.cpus, "seed": 1,
                                "scheduler": {"type": "asha", "time_attr": "training_iteration",
                                              "max_t": 4, "grace_period": 1,
                                              "reduction_factor": 2}}}
        t0 = time.time()
        r = c.server.request("POST", "/api/v1/sweeps", body)
        assert r.status == 201, r
        sid = r.json["id"]
        c.h.wait_for(lambda: c.server.request("GET", f"/api/v1/sweeps/{sid}").json["status"]
                     != "RUNNING", timeout=3600, what="the sweep to finish")
        wall = time.time() - t0
        db = c.dbname
        rows = [line.split("|") for line in
                c.pg.psql(DECISIONS.format(sid=sid), db=db).splitlines() if line]
        decisions = [float(ms) for _, _, ms in rows]
        started_s, finished_s, started, finished = (
            float(x) for x in c.pg.psql(RATES.format(sid=sid), db=db).split("|"))
    print(f"# {lc.machine_caveats()}")
    print(f"# {args.trials} trials, {args.cpus} at a time, reports {args.pause} s apart; "
          f"sweep wall time {wall:.1f} s")
    print(f"trials started   {started:.0f} in {started_s:.1f} s: {started / started_s:.1f}/s")
    print(f"trials finished  {finished:.0f} in {finished_s:.1f} s: {finished / finished_s:.1f}/s")
    s = lc.summary(decisions)
    if s["n"]:
        print(f"ASHA rung stops  {s['n']}: report -> stop decision ms  p50 {s['p50']:.1f}  "
              f"p90 {s['p90']:.1f}  p99 {s['p99']:.1f}  max {s['max']:.1f}")
    else:
        print("ASHA rung stops  none")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"trials": args.trials, "cpus": args.cpus, "wall_s": wall,
                       "started_s": started_s, "finished_s": finished_s,
                       "decisions_ms": decisions}, f)


if __name__ == "__main__":
    main()
