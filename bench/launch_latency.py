#!/usr/bin/python3
"""Submit → all workers running: latency of Trainyard's scheduling and launch path.

Starts PostgreSQL, one trainyard-server and one trainyard-agent (--cpus 16 so 16 one-CPU workers
fit) on this machine, then for each worker count submits jobs and measures

  e2e      from just before POST /api/v1/jobs to the RUNNING event's time (server clock; the
           server records RUNNING when the last worker_started arrives). Same host, same clock:
           no polling noise. This is the headline figure.
  sched    PENDING event → STARTING event (submit commit, wake-up, scheduling pass, placement)
  launch   STARTING event → RUNNING event (launch message, agent fork/exec of every worker,
           every worker_started recorded)
  deliver  STARTING event → the agent logs "launch job" (the launch message's trip)
  spawn    the agent's "launch job" → its last "started … rank" log line (fork/exec of every
           worker, one after another)
  record   last worker exec'd → RUNNING event (worker_started messages, one transaction each)
           (deliver/spawn/record use the agent log's millisecond timestamps, truncated: ±1 ms)
  client   from just before the POST to the first GET that shows RUNNING, polling every
           --poll-ms on a keep-alive connection: e2e plus up to one poll interval plus one GET
           (a job whose workers all exit before a poll sees RUNNING has no client sample).

After the runs it prints this machine's floor: N posix_spawn()s of the same entrypoint from
Python (see also build-bench3/bench/launch_spawn for fork vs posix_spawn in C).

Modes: sequential (each job finishes before the next is submitted) and burst (--burst N: N
one-worker jobs POSTed back to back, all fitting at once, then all waited for).

    /usr/bin/python3 bench/launch_latency.py                       # 1, 4, 16 workers, 100 each
    /usr/bin/python3 bench/launch_latency.py --workers 16 --jobs 200 --db external
    /usr/bin/python3 bench/launch_latency.py --burst 16 --rounds 7

Prints the figures (milliseconds); --json FILE also writes every sample. Not a test.
"""
import argparse
import http.client
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_cluster as lc  # noqa: E402

TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")


class Client:
    """A keep-alive HTTP/1.1 connection to the REST API."""

    def __init__(self, server):
        self.host, self.port = "127.0.0.1", server.port
        self.token = server.admin_token
        self.conn = None

    def request(self, method, path, body=None):
        for attempt in range(3):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
                hdrs = {"Authorization": f"Bearer {self.token}"}
                data = None
                if body is not None:
                    data = json.dumps(body).encode()
                    hdrs["Content-Type"] = "application/json"
                self.conn.request(method, path, body=data, headers=hdrs)
                r = self.conn.getresponse()
                text = r.read()
                return r.status, (json.loads(text) if text else None)
            except (http.client.HTTPException, OSError):
                if self.conn:
                    self.conn.close()
                self.conn = None
                if attempt == 2:
                    raise
        raise RuntimeError("unreachable")


def job_spec(workers, entry, name):
    return {"name": name, "entrypoint": entry, "backend": "none",
            "scaling_config": {"num_workers": workers, "resources_per_worker": {"CPU": 1}},
            "timeout_s": 600}


def events_of(client, job_id):
    status, body = client.request("GET", f"/api/v1/jobs/{job_id}/events")
    assert status == 200, body
    first = {}
    for e in body["events"]:
        first.setdefault(e["status"], lc.parse_ts(e["at"]))
    return first


def sample_from(job_id, t0, ev, t_obs=None):
    s = {"job": job_id, "t_starting": ev["STARTING"], "t_running": ev["RUNNING"],"e2e": (ev["RUNNING"] - t0) * 1e3,
         "sched": (ev["STARTING"] - ev["PENDING"]) * 1e3,
         "launch": (ev["RUNNING"] - ev["STARTING"]) * 1e3,
         "server": (ev["RUNNING"] - ev["PENDING"]) * 1e3,
         "post": (ev["PENDING"] - t0) * 1e3}
    if t_obs is not None:
        s["client"] = (t_obs - t0) * 1e3
    return s


def wait_terminal(client, job_id, poll_s=0.02, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        status, job = client.request("GET", f"/api/v1/jobs/{job_id}")
        if job["status"] in TERMINAL:
            return job
        time.sleep(poll_s)
    raise RuntimeError(f"job {job_id} did not finish: {job}")


def run_sequential(client, workers, jobs, entry, poll_s, warmup):
    samples = []
    for i in range(warmup + jobs):
        spec = job_spec(workers, entry, f"lat-{workers}w-{i}")
        t0 = time.time()
        status, body = client.request("POST", "/api/v1/jobs", spec)
        assert status == 201, body
        job_id = body["id"]
        t_obs = None
        while True:
            _, job = client.request("GET", f"/api/v1/jobs/{job_id}")
            if job["status"] == "RUNNING" or job["status"] in TERMINAL:
                t_obs = time.time() if job["status"] == "RUNNING" else None
                break
            time.sleep(poll_s)
        job = wait_terminal(client, job_id)
        if job["status"] != "SUCCEEDED":
            raise RuntimeError(f"job {job_id} ended {job['status']}: {job}")
        ev = events_of(client, job_id)
        if i >= warmup:
            samples.append(sample_from(job_id, t0, ev, t_obs))
    return samples


def run_burst(client, burst, rounds, entry):
    samples = []
    for r in range(rounds):
        sent = []
        for i in range(burst):
            t0 = time.time()
            status, body = client.request("POST", "/api/v1/jobs",
                                          job_spec(1, entry, f"burst-{r}-{i}"))
            assert status == 201, body
            sent.append((t0, body["id"]))
        for t0, job_id in sent:
            job = wait_terminal(client, job_id)
            if job["status"] != "SUCCEEDED":
                raise RuntimeError(f"job {job_id} ended {job['status']}")
        for t0, job_id in sent:
            samples.append(sample_from(job_id, t0, events_of(client, job_id)))
    return samples


LOG_RE = re.compile(r"^(\S+)Z \S+\s+proc\s+(launch|started) job (\d+) attempt (\d+)")


def agent_times(log_path):
    """job id → (time of 'launch job' log line, time of its last 'started … rank' line), from the
    agent's log (millisecond timestamps, the same wall clock as the server's events)."""
    out = {}
    with open(log_path, errors="replace") as f:
        for line in f:
            m = LOG_RE.match(line)
            if not m:
                continue
            t = lc.parse_ts(m.group(1) + "+00:00")
            job = int(m.group(3))
            first, last = out.get(job, (None, None))
            if m.group(2) == "launch":
                out[job] = (t, last)
            else:
                out[job] = (first, t)
    return out


def add_agent_breakdown(samples, times):
    """Splits `launch` with the agent's log: deliver (STARTING → agent got the launch), spawn
    (agent forks/execs every worker), record (last worker exec'd → RUNNING recorded)."""
    for s in samples:
        a = times.get(s["job"])
        if not a or a[0] is None or a[1] is None:
            continue
        s["deliver"] = (a[0] - s["t_starting"]) * 1e3
        s["spawn"] = (a[1] - a[0]) * 1e3
        s["record"] = (s["t_running"] - a[1]) * 1e3


def spawn_floor(n, rounds=5):
    """This machine's cost of starting n processes the way an agent must (posix_spawn of
    /bin/sh -c 'exec sleep 0.2', each returning once exec'd, new session): ms per round."""
    argv = ["/bin/sh", "-c", "exec sleep 0.2"]
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        pids = [os.posix_spawn(argv[0], argv, os.environ, setsid=True) for _ in range(n)]
        times.append((time.perf_counter() - t0) * 1e3)
        for p in pids:
            os.waitpid(p, 0)
    return times


def table(title, rows, keys=("e2e", "sched", "launch", "deliver", "spawn", "record", "client")):
    print(f"\n{title}")
    print(f"  {'figure':<8} {'n':>5} {'min':>8} {'p50':>8} {'p90':>8} {'p99':>8} {'max':>8}"
          f" {'mean':>8}   (ms)")
    for k in keys:
        vals = [s[k] for s in rows if k in s]
        if not vals:
            continue
        st = lc.summary(vals)
        print(f"  {k:<8} {st['n']:>5} {st['min']:>8.1f} {st['p50']:>8.1f} {st['p90']:>8.1f}"
              f" {st['p99']:>8.1f} {st['max']:>8.1f} {st['mean']:>8.1f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=lc.default_build())
    ap.add_argument("--db", choices=("embedded", "external"), default="embedded",
                    help="embedded: the server's own PostgreSQL (durable, the default "
                         "deployment); external: a harness cluster with fsync=off")
    ap.add_argument("--workers", default="1,4,16", help="comma separated worker counts")
    ap.add_argument("--jobs", type=int, default=100, help="measured jobs per worker count")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--entry", default='["/bin/sh","-c","exec sleep 0.2"]',
                    help="entrypoint as JSON")
    ap.add_argument("--poll-ms", type=float, default=2.0, help="client polling interval")
    ap.add_argument("--burst", type=int, default=0,
                    help="also run the burst variant: this many 1-worker jobs at once")
    ap.add_argument("--rounds", type=int, default=7, help="burst rounds")
    ap.add_argument("--cpus", type=int, default=16, help="the agent's --cpus")
    ap.add_argument("--server-debug", action="store_true",
                    help="run the server with --log-level debug --debug all (slower)")
    ap.add_argument("--keep-logs", action="store_true", help="print the log paths at the end")
    ap.add_argument("--json", help="write every sample here")
    args = ap.parse_args()

    lc.use_build(args.build)
    entry = json.loads(args.entry)
    counts = [int(x) for x in args.workers.split(",") if x]
    server_args = ["--log-level", "debug", "--debug", "all"] if args.server_debug else []
    print(f"# launch_latency: build {args.build}, db {args.db}, entry {entry}")
    print(f"# machine: {lc.machine_caveats()}")
    out = {"args": vars(args), "machine": lc.machine_caveats(), "sequential": {}, "burst": None}
    with lc.Cluster(db=args.db, agent_cpus=args.cpus, server_args=server_args) as cl:
        client = Client(cl.server)
        for w in counts:
            samples = run_sequential(client, w, args.jobs, entry, args.poll_ms / 1e3,
                                     args.warmup)
            add_agent_breakdown(samples, agent_times(cl.agent.log_path))
            out["sequential"][w] = samples
            table(f"sequential, {w} worker(s) per job, {len(samples)} jobs "
                  f"(client polls every {args.poll_ms:g} ms)", samples)
        if args.burst:
            samples = run_burst(client, args.burst, args.rounds, entry)
            add_agent_breakdown(samples, agent_times(cl.agent.log_path))
            out["burst"] = samples
            table(f"burst: {args.burst} one-worker jobs POSTed back to back, {args.rounds} "
                  f"rounds ({len(samples)} jobs)", samples, keys=("e2e", "post", "sched",
                                                                  "launch", "deliver", "spawn",
                                                                  "record"))
        if args.keep_logs:
            print(f"\n# server log: {cl.server.log_path}\n# agent log: {cl.agent.log_path}")
    floor = {}
    for w in counts:
        floor[w] = spawn_floor(w)
        print(f"\n# machine floor: {w} x posix_spawn(/bin/sh -c 'exec sleep 0.2') from Python, "
              f"5 rounds: " + ", ".join(f"{t:.1f}" for t in floor[w]) + " ms")
    out["spawn_floor_ms"] = floor
    print(f"\n# machine after: {lc.machine_caveats()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f)


if __name__ == "__main__":
    main()
