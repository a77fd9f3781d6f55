#!/usr/bin/python3
"""Resident memory of trainyard-server and trainyard-agent under a sustained streaming load, over
--seconds (default 600): is it flat?

Starts the server (embedded, durable PostgreSQL) and one agent, then one job of --ranks workers
that, for the whole run, each make --reports reports per second (--metrics numbers each) through
the Python SDK and print --lines log lines per second; --subscribers /stream clients follow the job
and read everything. Every --every seconds it samples VmRSS of the server and the agent from
/proc. Prints the samples, then per process the RSS after the warm-up (the first 60 s), the last
and the largest, and the drift last / after-warm-up. Not a test: nothing is asserted.

    /usr/bin/python3 bench/stream_memory.py --build build --seconds 600
"""
import argparse
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_cluster  # noqa: E402


def worker_script(seconds, reports, metrics, lines):
    """A worker printing `lines` log lines per second and making a report every
    lines // reports lines (reports <= lines)."""
    every = max(1, lines // max(1, reports))
    return f"""
import time, trainyard
end = time.time() + {seconds}
n = 0
while time.time() < end:
    t0 = time.time()
    print("line", n, "x" * 60, flush=True)
    if n % {every} == 0:
        trainyard.report({{f"m{{i}}": n + i * 0.5 for i in range({metrics})}})
    n += 1
    time.sleep(max(0.0, 1.0 / {lines} - (time.time() - t0)))
"""


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def subscriber(h, server, job, stop, counts, i):
    from wsclient import WebSocket
    ws = WebSocket(server.ws_url + "/stream", subprotocol="trainyard-stream.v1")
    ws.send_json({"type": "auth", "token": server.admin_token})
    ws.send_json({"type": "subscribe", "job": job, "after": 0})
    while not stop.is_set():
        try:
            msg = json.loads(ws.recv_text(timeout=1.0))
        except Exception:  # a quiet second, or the end
            continue
        if msg.get("type") == "event":
            counts[i] += 1
    ws.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=launch_cluster.default_build())
    ap.add_argument("--seconds", type=int, default=600)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--reports", type=int, default=50, help="per rank per second")
    ap.add_argument("--metrics", type=int, default=20)
    ap.add_argument("--lines", type=int, default=200, help="per rank per second")
    ap.add_argument("--subscribers", type=int, default=20)
    ap.add_argument("--every", type=int, default=30)
    a = ap.parse_args()
    launch_cluster.use_build(a.build)
    with launch_cluster.Cluster(db="embedded", agent_cpus=a.ranks) as c:
        server, agent = c.server, c.agent
        job = server.submit({"name": "stream-memory",
                             "entrypoint": ["/usr/bin/python3", "-c",
                                            worker_script(a.seconds, a.reports, a.metrics,
                                                          a.lines)],
                             "scaling_config": {"num_workers": a.ranks}})["id"]
        stop = threading.Event()
        counts = [0] * a.subscribers
        subs = [threading.Thread(target=subscriber, args=(c.h, server, job, stop, counts, i))
                for i in range(a.subscribers)]
        for t in subs:
            t.start()
        print(f"load: {a.ranks} ranks x {a.reports} reports/s x {a.metrics} numbers "
              f"= {a.ranks * a.reports * a.metrics} points/s, {a.ranks * a.lines} log lines/s, "
              f"{a.subscribers} subscribers, {a.seconds} s")
        samples = []
        t0 = time.time()
        while time.time() - t0 < a.seconds:
            time.sleep(a.every)
            s = (time.time() - t0, rss_kib(server.proc.pid), rss_kib(agent.proc.pid))
            samples.append(s)
            print(f"  t={s[0]:6.0f} s  server {s[1] / 1024:7.1f} MiB  agent {s[2] / 1024:7.1f} MiB"
                  f"  events delivered {sum(counts):,}", flush=True)
        server.wait_job(job, {"SUCCEEDED", "FAILED"}, timeout=120)
        stop.set()
        for t in subs:
            t.join()
        warm = [s for s in samples if s[0] >= 60] or samples
        for name, col in (("server", 1), ("agent", 2)):
            first, last = warm[0][col], warm[-1][col]
            peak = max(s[col] for s in warm)
            print(f"{name}: after warm-up {first / 1024:.1f} MiB, last {last / 1024:.1f} MiB, "
                  f"max {peak / 1024:.1f} MiB, drift {100.0 * (last - first) / first:+.1f} %")
        stored = server.request("GET", f"/api/v1/jobs/{job}/logs?tail=1").status
        print(f"job {job}: {server.request('GET', f'/api/v1/jobs/{job}').json['status']}, "
              f"logs answer {stored}, events delivered to subscribers {sum(counts):,}")


if __name__ == "__main__":
    main()
