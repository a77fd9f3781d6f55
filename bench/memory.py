#!/usr/bin/python3
"""Resident memory of trainyard-agent and trainyard-server (VmRSS / VmHWM from /proc).

  agent   one trainyard-agent (--cpus 16) supervising 16 workers of one job: idle, while the
          16 workers sleep, while the 16 workers each send trainyard.report() 200 times, after.
  server  one trainyard-server (embedded PostgreSQL, not counted) with 1,000,000 stored points
          (one simulated agent, a node of its own, runs one 4-worker job and sends 2,500
          reports of 100 numbers per rank through the agent protocol, as bench/metrics_ingest.py
          does; then three of its series, every rank, are read back through
          GET /jobs/{id}/metrics), 100 registered nodes (bench/memory_loadgen.py: 100
          websocket connections, register + heartbeats) and 10,000 jobs: submitted through the
          REST API with an impossible resource (so they stay PENDING: the scheduler and its spec
          cache hold all of them),
          then all stopped (STOPPED: 10,000 finished jobs in history), then read back (every
          page of GET /api/v1/jobs and GET of every job: the read caches filled). The goal
          (issue 27): server <= 100 MiB, agent <= 20 MiB, VmHWM (the peak) included.

    /usr/bin/python3 bench/memory.py                 # both
    /usr/bin/python3 bench/memory.py --only server --nodes 100 --jobs 10000 --points 1000000

Prints a table (MiB). Not a test.
"""
import argparse
import concurrent.futures
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_cluster as lc  # noqa: E402
import launch_latency as ll  # noqa: E402
import memory_loadgen  # noqa: E402
import metrics_ingest as mi  # noqa: E402

ROWS = []


def sample(proc_name, phase, pid, note=""):
    st = lc.proc_status(pid)
    ROWS.append((proc_name, phase, st["VmRSS"], st["VmHWM"], st.get("RssAnon", 0),
                 st.get("RssFile", 0), st.get("Threads", 0), note))
    print(f"  {proc_name:<7} {phase:<52} VmRSS {st['VmRSS'] / 1024:7.1f} MiB  VmHWM "
          f"{st['VmHWM'] / 1024:7.1f} MiB  (anon {st.get('RssAnon', 0) / 1024:.1f}, file "
          f"{st.get('RssFile', 0) / 1024:.1f}, threads {st.get('Threads', 0)}) {note}",
          flush=True)
    return st


def fd_count(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


# ------------------------------------------------------------------------------------------------
# agent
# ------------------------------------------------------------------------------------------------

REPORTER = ("import trainyard, time\n"
            "for i in range(200):\n"
            "    trainyard.report({'step': i, 'loss': 1.0 / (i + 1), 'accuracy': i / 200.0})\n"
            "time.sleep(3)\n")


def bench_agent(args):
    print("\nagent: 16 workers of one job on one agent (--cpus 16)")
    with lc.Cluster(db=args.db, agent_cpus=16) as cl:
        c = ll.Client(cl.server)
        apid = cl.agent.proc.pid
        time.sleep(1)
        sample("agent", "registered, idle", apid)
        spec = ll.job_spec(16, ["/bin/sh", "-c", "exec sleep 20"], "mem-sleep")
        status, body = c.request("POST", "/api/v1/jobs", spec)
        assert status == 201, body
        job = body["id"]
        cl.server.wait_job(job, ("RUNNING",), timeout=60)
        for k in range(3):
            time.sleep(2)
            sample("agent", f"16 workers running (sleep), t+{2 * (k + 1)} s", apid)
        c.request("POST", f"/api/v1/jobs/{job}/stop")
        ll.wait_terminal(c, job, timeout=60)
        sample("agent", "after the job (16 workers stopped)", apid)
        spec = ll.job_spec(16, ["/usr/bin/python3", "-c", REPORTER], "mem-report")
        status, body = c.request("POST", "/api/v1/jobs", spec)
        assert status == 201, body
        job = body["id"]
        cl.server.wait_job(job, ("RUNNING",), timeout=60)
        peak = None
        deadline = time.time() + 120
        while time.time() < deadline:
            _, j = c.request("GET", f"/api/v1/jobs/{job}")
            if j["status"] in ll.TERMINAL:
                break
            st = lc.proc_status(apid)
            peak = max(peak or 0, st["VmRSS"])
            time.sleep(0.2)
        sample("agent", "16 workers x 200 reports each, done", apid,
               f"(max VmRSS sampled while reporting {peak / 1024 if peak else 0:.1f} MiB; "
               f"job {j['status']})")
        time.sleep(1)
        sample("agent", "idle again", apid)


# ------------------------------------------------------------------------------------------------
# server
# ------------------------------------------------------------------------------------------------

def submit_many(server, n, threads):
    """POSTs n never-fitting jobs over `threads` keep-alive connections; returns their ids."""
    ids = []
    lock = threading.Lock()
    per = [n // threads + (1 if i < n % threads else 0) for i in range(threads)]

    def work(k, count):
        c = ll.Client(server)
        mine = []
        for i in range(count):
            spec = {"name": f"hist-{k}-{i}", "entrypoint": ["true"], "backend": "none",
                    "scaling_config": {"num_workers": 1,
                                       "resources_per_worker": {"CPU": 1, "unobtainium": 1}},
                    "metadata": {"bench": "memory"}, "train_loop_config": {"i": i, "lr": 0.01}}
            status, body = c.request("POST", "/api/v1/jobs", spec)
            if status != 201:
                raise RuntimeError(f"submit: {status} {body}")
            mine.append(body["id"])
        with lock:
            ids.extend(mine)

    with concurrent.futures.ThreadPoolExecutor(threads) as ex:
        for f in [ex.submit(work, k, per[k]) for k in range(threads)]:
            f.result()
    return sorted(ids)


def stop_many(server, ids, threads):
    def work(chunk):
        c = ll.Client(server)
        for i in chunk:
            status, body = c.request("POST", f"/api/v1/jobs/{i}/stop")
            if status not in (200, 202, 409):
                raise RuntimeError(f"stop {i}: {status} {body}")

    chunks = [ids[k::threads] for k in range(threads)]
    with concurrent.futures.ThreadPoolExecutor(threads) as ex:
        for f in [ex.submit(work, ch) for ch in chunks]:
            f.result()


def read_all(server, ids, threads):
    c = ll.Client(server)
    cursor, pages = None, 0
    while True:
        path = "/api/v1/jobs?limit=1000" + (f"&cursor={cursor}" if cursor else "")
        status, body = c.request("GET", path)
        assert status == 200, body
        pages += 1
        cursor = body.get("next_cursor")
        if not cursor:
            break

    def work(chunk):
        cc = ll.Client(server)
        for i in chunk:
            cc.request("GET", f"/api/v1/jobs/{i}")

    with concurrent.futures.ThreadPoolExecutor(threads) as ex:
        for f in [ex.submit(work, ids[k::threads]) for k in range(threads)]:
            f.result()
    return pages


def count_status(server, status):
    c = ll.Client(server)
    n, cursor = 0, None
    while True:
        path = f"/api/v1/jobs?status={status}&limit=1000" + (f"&cursor={cursor}" if cursor else "")
        _, body = c.request("GET", path)
        n += len(body["jobs"])
        cursor = body.get("next_cursor")
        if not cursor:
            return n


class PointsAgent(threading.Thread):
    """A simulated agent on a node of its own: runs the job it is sent (4 ranks), sends its
    reports of 100 numbers until `points` are acked, then heartbeats until stop() (its node stays
    ALIVE, its job RUNNING)."""

    RANKS, METRICS = 4, 100

    def __init__(self, srv, points):
        super().__init__(daemon=True)
        self.srv, self.points = srv, points
        self.done = threading.Event()
        self.halt = threading.Event()
        self.error = None

    def run(self):
        try:
            self._run()
        except Exception as e:  # reported by the main thread
            self.error = e
            self.done.set()

    def _run(self):
        token = open(os.path.join(self.srv.data_dir, "cluster.token")).read().strip()
        ws = mi.WebSocket(self.srv.ws_url + "/agent")
        ws.send_json({"type": "register", "token": token, "workers": [],
                      "node": {"id": "mem-points", "hostname": "mem-points",
                               "address": "127.0.0.1",
                               "resources": {"CPU": self.RANKS, "memory_mb": 8192, "GPU": []},
                               "gpu_type": None, "labels": {}, "version": "bench",
                               "port_range": [29500, 29999]}})
        ws.wait_for(lambda m: m["type"] == "registered", 30)
        launch = ws.wait_for(lambda m: m["type"] == "launch", 60)
        job, attempt = launch["job_id"], launch["attempt"]
        seq = 0
        for w in launch["workers"]:
            seq += 1
            ws.send_json({"type": "worker_started", "seq": seq, "job_id": str(job),
                          "attempt": attempt, "rank": w["rank"], "pid": 1000 + w["rank"]})
        names = [f"layer{i:03d}.grad_norm" for i in range(self.METRICS)]
        rounds = -(-self.points // (self.RANKS * self.METRICS))
        acked, k = 0, 0
        while acked < seq or k < rounds:
            while k < rounds and seq - acked < 1024:
                k += 1
                t = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
                for rank in range(self.RANKS):
                    seq += 1
                    values = ",".join(f'"{n}":{(k * 7 + i + rank) % 1000 / 997.0}'
                                      for i, n in enumerate(names))
                    mi.send_raw(ws.sock, f'{{"type":"report","seq":{seq},"job_id":"{job}",'
                                         f'"attempt":{attempt},"rank":{rank},"report_seq":{k},'
                                         f'"metrics":{{{values}}},"step":{k},"time":"{t}",'
                                         f'"checkpoint_dir":null}}')
            m = ws.recv_json(timeout=60)
            if m.get("type") == "ack":
                acked = max(acked, m["seq"])
        self.job, self.stored = job, rounds * self.RANKS * self.METRICS
        self.done.set()
        while not self.halt.wait(2):
            ws.send_json({"type": "heartbeat"})
            try:
                while True:
                    ws.recv_json(timeout=0.01)
            except Exception:  # nothing more to read now
                pass
        ws.close()


def store_points(srv, c, points):
    """Starts a PointsAgent, waits until its points are stored, reads three series back;
    returns the agent (stop it with .halt.set())."""
    agent = PointsAgent(srv, points)
    agent.start()
    t0 = time.time()
    job = srv.submit({"name": "mem-points", "entrypoint": ["true"], "backend": "none",
                      "scaling_config": {"num_workers": PointsAgent.RANKS}})["id"]
    if not agent.done.wait(900) or agent.error:
        raise RuntimeError(f"points agent: {agent.error or 'timed out'}")
    dt = time.time() - t0
    print(f"  stored {agent.stored} points of job {job} in {dt:.1f} s "
          f"({agent.stored / dt:,.0f} points/s)")
    for name in ("layer000.grad_norm", "layer050.grad_norm", "layer099.grad_norm"):
        status, body = c.request("GET", f"/api/v1/jobs/{job}/metrics?name={name}")
        assert status == 200, body
    return agent


def bench_server(args):
    print(f"\nserver: {args.points} stored points, {args.nodes} registered nodes, "
          f"{args.jobs} jobs")
    soft, hard = memory_loadgen.raise_nofile(args.nodes + 512)
    print(f"  ulimit -n: {soft} (hard {hard}); the server inherits it")
    # Every simulated node connects from 127.0.0.1, up to 64 handshakes at a time: more than the
    # 32 unauthenticated connections the server allows one address by default.
    with lc.Cluster(db=args.db, server_args=("--ws-max-preauth-per-ip", "256")) as cl:
        srv = cl.server
        spid = srv.proc.pid
        c = ll.Client(srv)
        time.sleep(1)
        sample("server", "started, idle, no nodes, no jobs", spid)
        points = store_points(srv, c, args.points) if args.points else None
        if points:
            sample("server", f"+ {points.stored} points stored and read back", spid)
        gen = subprocess.Popen(
            [sys.executable, os.path.join(lc.HERE, "memory_loadgen.py"), "--url", srv.ws_url,
             "--token-file", os.path.join(srv.data_dir, "cluster.token"), "--nodes",
             str(args.nodes), "--stdin-eof", "--report-s", "15"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines = []

        def pump():
            for line in gen.stdout:
                lines.append(line.rstrip())
                print(f"  [loadgen] {line.rstrip()}", flush=True)

        threading.Thread(target=pump, daemon=True).start()
        t0 = time.time()
        while not any(x.startswith("registered") for x in lines):
            if gen.poll() is not None or time.time() - t0 > 600:
                raise RuntimeError(f"load generator: {lines}")
            time.sleep(0.2)
        # Wait until the server has recorded them all.
        while True:
            _, body = c.request("GET", "/api/v1/nodes")
            alive = sum(1 for n in body["nodes"] if n["status"] == "ALIVE")
            if alive >= args.nodes + (1 if points else 0) or time.time() - t0 > 600:
                break
            time.sleep(0.5)
        print(f"  {alive} nodes ALIVE after {time.time() - t0:.1f} s; server fds "
              f"{fd_count(spid)}")
        time.sleep(5)
        sample("server", f"{alive} nodes registered, heartbeating", spid)
        t0 = time.time()
        if args.jobs == 0:
            ids = []
        else:
            ids = submit_many(srv, args.jobs, args.threads)
        dt = max(time.time() - t0, 1e-9)
        print(f"  submitted {len(ids)} jobs in {dt:.1f} s ({len(ids) / dt:.0f}/s)")
        time.sleep(6)  # a few scheduling passes over all of them
        pending = count_status(srv, "PENDING")
        sample("server", f"+ {len(ids)} jobs PENDING (impossible resource)", spid,
               f"({pending} pending)")
        t0 = time.time()
        stop_many(srv, ids, args.threads)
        deadline = time.time() + 300
        while count_status(srv, "PENDING,STOPPING") and time.time() < deadline:
            time.sleep(1)
        print(f"  stopped {len(ids)} jobs in {time.time() - t0:.1f} s")
        time.sleep(6)
        stopped = count_status(srv, "STOPPED")
        sample("server", f"+ {len(ids)} jobs in history (all STOPPED)", spid,
               f"({stopped} stopped)")
        pages = read_all(srv, ids, args.threads)
        sample("server", f"after reading them all ({pages} list pages + {len(ids)} GETs)", spid)
        step = max(1, args.soak // 4)
        for waited in range(step, args.soak + 1, step):
            time.sleep(step)
            _, body = c.request("GET", "/api/v1/nodes")
            alive = sum(1 for n in body["nodes"] if n["status"] == "ALIVE")
            sample("server", f"after a further {waited} s of heartbeats", spid,
                   f"({alive} nodes ALIVE, {fd_count(spid)} fds)")
        gen.stdin.close()
        try:
            gen.wait(timeout=60)
        except subprocess.TimeoutExpired:
            gen.kill()
        if points:
            points.halt.set()
            points.join(10)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=lc.default_build())
    ap.add_argument("--db", choices=("embedded", "external"), default="embedded")
    ap.add_argument("--only", choices=("agent", "server"))
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--points", type=int, default=1000000,
                    help="metric points stored through the agent protocol first")
    ap.add_argument("--jobs", type=int, default=10000)
    ap.add_argument("--threads", type=int, default=4, help="REST client connections")
    ap.add_argument("--soak", type=int, default=20, help="seconds of heartbeats at the end")
    args = ap.parse_args()
    lc.use_build(args.build)
    print(f"# memory: build {args.build}, db {args.db}")
    print(f"# machine: {lc.machine_caveats()}")
    if args.only in (None, "agent"):
        bench_agent(args)
    if args.only in (None, "server"):
        bench_server(args)
    print("\n| process | phase | VmRSS MiB | VmHWM MiB |")
    print("|---|---|---:|---:|")
    for name, phase, rss, hwm, _anon, _file, _thr, note in ROWS:
        print(f"| {name} | {phase} {note} | {rss / 1024:.1f} | {hwm / 1024:.1f} |")
    print(f"# machine after: {lc.machine_caveats()}")


if __name__ == "__main__":
    main()
