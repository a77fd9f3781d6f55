#!/usr/bin/python3
"""Worker logs end to end: lines per second from a worker's stdout into PostgreSQL and back out
through GET /api/v1/jobs/{id}/logs, beside the same bytes copied to a file with dd.

Starts PostgreSQL (the server's embedded one by default, durable; --db external: harness-style,
fsync off), one trainyard-server and one trainyard-agent on this machine. For each run, a job of
--ranks workers each prints --lines lines of --width bytes as fast as Python can write them;
the clock starts just before the submit and stops when GET /logs?rank=R&tail=1 returns the last
line of every rank (polled every 20 ms), so the figure includes scheduling and launch (a few
tens of ms). Then the worker log files (the same bytes) are copied with
`dd bs=1M conv=fsync` (to disk, durably, as PostgreSQL commits) and `dd bs=1M` (page cache only),
and the lines-per-second equivalents printed side by side. Not a test: nothing is asserted.

    /usr/bin/python3 bench/log_throughput.py --build build            # 200,000 lines, 1 rank
    /usr/bin/python3 bench/log_throughput.py --build build --ranks 4 --lines 100000
    /usr/bin/python3 bench/log_throughput.py --build build --latency 100

--latency N: instead, one worker prints N lines 100 ms apart, each holding its wall-clock time,
and a client polls GET /logs?tail=1 every 2 ms: printed -> readable latency (p50, p99, max).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_cluster  # noqa: E402


def worker_script(lines, width):
    return ("import os, sys\n"
            "r = os.environ['RANK']\n"
            f"pad = 'x' * max(0, {width} - 14)\n"
            "w = sys.stdout.write\n"
            f"for i in range({lines}):\n"
            "    w('r%s %09d %s\\n' % (r, i, pad))\n"
            "sys.stdout.flush()\n")


def last_line(server, job, rank):
    r = server.request("GET", f"/api/v1/jobs/{job}/logs?rank={rank}&tail=1")
    return r.text.rstrip("\n") if r.status == 200 else ""


def dd_rate(paths, sync):
    """Seconds dd takes to copy `paths` (concatenated) to a fresh file."""
    out = tempfile.mkdtemp(prefix="ty-bench-dd-")
    total = 0.0
    for i, p in enumerate(paths):
        args = ["dd", f"if={p}", f"of={os.path.join(out, str(i))}", "bs=1M", "status=none"]
        if sync:
            args.append("conv=fsync")
        t0 = time.perf_counter()
        subprocess.run(args, check=True)
        total += time.perf_counter() - t0
        os.unlink(os.path.join(out, str(i)))
    os.rmdir(out)
    return total


def latency(server, n):
    script = ("import sys, time\n"
              f"for i in range({n}):\n"
              "    time.sleep(0.1)\n"
              "    sys.stdout.write('%d %.6f\\n' % (i, time.time())); sys.stdout.flush()\n")
    job = server.submit({"name": "loglatency",
                         "entrypoint": ["/usr/bin/python3", "-c", script]})["id"]
    seen, lat = -1, []
    while seen < n - 1:
        line = last_line(server, job, 0)
        now = time.time()
        if line:
            i, t = line.split()
            if int(i) > seen:
                if int(i) == seen + 1:  # a line seen the moment it became readable
                    lat.append((now - float(t)) * 1000)
                seen = int(i)
        time.sleep(0.002)
    lat.sort()
    print(f"latency printed -> readable through GET /logs, {len(lat)} lines: "
          f"p50 {lat[len(lat) // 2]:.1f} ms, p99 {lat[int(len(lat) * 0.99)]:.1f} ms, "
          f"max {lat[-1]:.1f} ms")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=launch_cluster.default_build())
    ap.add_argument("--db", choices=["embedded", "external"], default="embedded")
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--lines", type=int, default=200000)
    ap.add_argument("--width", type=int, default=100, help="bytes per line, newline included")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--latency", type=int, default=0, metavar="N")
    a = ap.parse_args()
    launch_cluster.use_build(a.build)
    with launch_cluster.Cluster(db=a.db, agent_cpus=max(a.ranks, 1)) as c:
        server, agent = c.server, c.agent
        if a.latency:
            latency(server, a.latency)
            return
        for run in range(a.runs):
            t0 = time.perf_counter()
            job = server.submit({"name": f"logbench-{run}",
                                 "entrypoint": ["/usr/bin/python3", "-c",
                                                worker_script(a.lines, a.width)],
                                 "scaling_config": {"num_workers": a.ranks}})["id"]
            want = {r: f"r{r} {a.lines - 1:09d} " + "x" * max(0, a.width - 14)
                    for r in range(a.ranks)}
            pending = set(want)
            while pending:
                for r in list(pending):
                    if last_line(server, job, r) == want[r]:
                        pending.discard(r)
                time.sleep(0.02)
            e2e = time.perf_counter() - t0
            server.wait_job(job, {"SUCCEEDED", "FAILED"})
            paths = [os.path.join(agent.data_dir, "logs", str(job), "1", f"rank-{r}.log")
                     for r in range(a.ranks)]
            nbytes = sum(os.path.getsize(p) for p in paths)
            nlines = a.lines * a.ranks
            full = server.request("GET", f"/api/v1/jobs/{job}/logs")
            assert full.status == 200 and full.text.count("\n") == nlines, "lines missing"
            sync = dd_rate(paths, True)
            cache = dd_rate(paths, False)
            print(f"run {run}: {nlines} lines, {nbytes / 1e6:.1f} MB, {a.ranks} rank(s): "
                  f"trainyard {nlines / e2e:,.0f} lines/s ({nbytes / e2e / 1e6:.1f} MB/s, "
                  f"{e2e:.2f} s) | dd conv=fsync {nlines / sync:,.0f} lines/s "
                  f"({nbytes / sync / 1e6:.0f} MB/s) | dd page cache {nlines / cache:,.0f} "
                  f"lines/s ({nbytes / cache / 1e6:.0f} MB/s)", flush=True)
        print(f"command: /usr/bin/python3 bench/log_throughput.py --build {a.build} "
              f"--db {a.db} --ranks {a.ranks} --lines {a.lines} --width {a.width}")


if __name__ == "__main__":
    main()
