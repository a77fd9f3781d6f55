#!/usr/bin/python3
"""Report → subscriber latency of the live stream (/stream, docs/streams.md).

Starts PostgreSQL (--db external: a harness-style cluster with fsync off, the default; --db
embedded: the server's own, durable, as deployed) and one trainyard-server, submits --jobs jobs (no agent: they stay PENDING, their
streams exist), then runs build/bench/stream_latency: one thread appends report rows with
ty_stream_append_batch at --points metric points per second (--metrics numbers per report, one
batch every --batch-ms), spread over the jobs, while --subscribers websocket clients (spread
over the jobs) follow them; each event's latency is the time from handing its batch to
PostgreSQL to the subscriber reading it (same machine, same clock). Ingestion goes straight to
ty_stream_append_batch: the agents' report path on this branch commits one report per
transaction and is not the subject here.

What the figures include: p50..max is report -> subscriber, i.e. the ingesting side's statement
and commit (with --db embedded: the WAL fsync) plus the stream (NOTIFY, the server's read of the
new rows, fan-out, websocket write, client read); commit_* is the commit alone (statement handed
over -> its reply, per batch); after_commit_* is each event's latency after its batch's commit
returned: the stream's own part. --batch: subscribers ask for batched delivery.

    /usr/bin/python3 bench/stream_latency.py                         # 100 subs, 10 jobs, 100k pts/s
    /usr/bin/python3 bench/stream_latency.py --jobs 1                # all 100 on one job
    /usr/bin/python3 bench/stream_latency.py --db embedded --seconds 60
    /usr/bin/python3 bench/stream_latency.py --jobs 1 --batch        # batched delivery

Prints the figures. Not a test.
"""
import argparse
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_cluster as lc  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.environ.get("TY_BUILD_DIR") or
                    os.path.join(lc.ROOT, "build"))
    ap.add_argument("--subscribers", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=10)
    ap.add_argument("--points", type=float, default=100000)
    ap.add_argument("--metrics", type=int, default=20)
    ap.add_argument("--batch-ms", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--warmup", type=float, default=5)
    ap.add_argument("--db", choices=("external", "embedded"), default="external")
    ap.add_argument("--server-arg", action="append", default=[])
    ap.add_argument("--batch", action="store_true",
                    help="subscribers ask for batched delivery (several events per frame)")
    a = ap.parse_args()
    lc.use_build(a.build)
    binary = os.path.join(os.path.abspath(a.build), "bench", "stream_latency")
    cluster = lc.Cluster(db=a.db, server_args=a.server_arg)
    with cluster:
        srv = cluster.server
        if a.db == "external":
            conninfo = cluster.pg.url(cluster.dbname)
        else:
            sock = re.search(r"embedded PostgreSQL running \(socket in (\S+),", srv.log_text())
            conninfo = f"host={sock.group(1)} dbname=trainyard user=trainyard"
        jobs = [srv.submit({"name": f"bench-{i}", "entrypoint": ["true"]})["id"]
                for i in range(a.jobs)]
        cpu0 = lc.service_cpu(cluster)
        run = subprocess.run(
            [binary, "--conninfo", conninfo, "--ws",
             f"127.0.0.1:{srv.ws_port}", "--token", srv.admin_token, "--jobs",
             ",".join(map(str, jobs)), "--subscribers", str(a.subscribers), "--points",
             str(a.points), "--metrics", str(a.metrics), "--batch-ms", str(a.batch_ms),
             "--seconds", str(a.seconds), "--warmup", str(a.warmup)] +
            (["--batch"] if a.batch else []),
            stdout=subprocess.PIPE, text=True)
        if run.returncode != 0:
            sys.exit("stream_latency failed; the server's log ends with:\n" +
                     "\n".join(srv.log_text().splitlines()[-20:]))
        out = run.stdout.strip()
        cpu = lc.service_cpu(cluster) - cpu0
        print(f"# {lc.machine_caveats()}")
        print(f"# db={a.db} server+postgres CPU seconds during the run: {cpu:.1f}")
        print(out)


if __name__ == "__main__":
    main()
