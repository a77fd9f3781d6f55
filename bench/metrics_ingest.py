#!/usr/bin/env python3
"""Sustained metric ingest: points per second from simulated agents into PostgreSQL through
trainyard-server, beside PostgreSQL's own COPY into the same table in the same run (the ceiling).

Each simulated agent is a process speaking the agent protocol (docs/agent-protocol.md) over a
websocket, as a real agent relays its workers' reports from its spool: it registers a node, is
sent the launch of its own job, reports its workers started, then sends reports (each with
--metrics numbers) for every rank as fast as the server acks them, keeping at most --window
events unacked. A point counts once the server has acked its report (acked = committed). A report
is one `reports` row with its numbers inline (reports.metrics, migration 0022). Then the very rows
the server stored are copied out and loaded again into the same `reports` table (as another job)
with PostgreSQL's COPY (psql \\copy), timed the same way: the ceiling. For comparison, the same
points are then copied into a table shaped as the per-number `metrics` table was before 0022 (the
old design's ceiling). PostgreSQL is durable here (fsync and synchronous_commit on).

Usage: bench/metrics_ingest.py [--agents 4] [--ranks 4] [--metrics 100] [--seconds 10] [--late 1]
[--copies 3] [--statements 20] (--copies N: the bare COPY is run N times, the ratio is to their
median) (--statements N: also print the N statements PostgreSQL spent most time in
while the server ingested, from pg_stat_statements with track = all: nested ones included)
(builds nothing: run `cmake --build build` first; TY_BUILD_DIR picks another build).
"""
import argparse
import json
import multiprocessing
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import harness  # noqa: E402
from wsclient import WebSocket  # noqa: E402


class DurableCluster(harness.PostgresCluster):
    """The harness's throw-away cluster, but durable: fsync and synchronous_commit on; with
    pg_stat_statements loaded when `statements` (--statements)."""

    def __init__(self, statements=False):
        super().__init__()
        self.statements = statements

    def start(self):
        os.makedirs(self.sockdir)
        if self.as_postgres:
            import pwd
            pw = pwd.getpwnam("postgres")
            for p in (self.root, self.sockdir):
                os.chown(p, pw.pw_uid, pw.pw_gid)
        self._run([os.path.join(self.bindir, "initdb"), "-D", self.pgdata, "-U", "trainyard",
                   "-A", "trust", "-E", "UTF8", "--no-locale"])
        self._run([os.path.join(self.bindir, "pg_ctl"), "start", "-D", self.pgdata, "-l",
                   self.log, "-w", "-o",
                   f"-k {self.sockdir} -c listen_addresses='' -c max_connections=100 "
                   "-c shared_buffers=512MB -c max_wal_size=4GB" +
                   (" -c shared_preload_libraries=pg_stat_statements"
                    " -c pg_stat_statements.track=all" if self.statements else "")])
        return self


def send_raw(sock, text):
    """A client text frame with a zero masking key (allowed by RFC 6455; XOR 0 costs nothing)."""
    payload = text.encode()
    n = len(payload)
    if n < 126:
        head = bytes([0x81, 0x80 | n])
    elif n < 1 << 16:
        head = bytes([0x81, 0x80 | 126]) + struct.pack("!H", n)
    else:
        head = bytes([0x81, 0x80 | 127]) + struct.pack("!Q", n)
    sock.sendall(head + b"\0\0\0\0" + payload)


def agent_main(*args):
    """agent_run, whose failure is put on `out` (the last argument) as a string, so that the
    bench stops with it instead of waiting for a result that never comes."""
    try:
        agent_run(*args)
    except Exception as e:  # noqa: BLE001 - reported to the parent, which raises it
        args[-1].put(f"{args[2]}: {type(e).__name__}: {e}")


def agent_run(ws_url, token, node_id, ranks, nmetrics, seconds, window, delay, out):
    """One simulated agent: registers after `delay` seconds, then reports for `ranks` ranks of
    the job it is sent (every job is alike and fills a node: the scheduler places them on the
    nodes in the order they registered, which is not the order the agents were started in)
    until `seconds` pass; puts (reports acked, first send time, last ack time, seconds from its
    registration to its job's launch, delay) on `out`."""
    time.sleep(delay)
    ws = WebSocket(ws_url + "/agent")
    ws.send_json({"type": "register", "token": token, "workers": [],
                  "node": {"id": node_id, "hostname": node_id, "address": "127.0.0.1",
                           "resources": {"CPU": ranks, "memory_mb": 8192, "GPU": []},
                           "gpu_type": None, "labels": {}, "version": "bench",
                           "port_range": [29500, 29999]}})
    ws.wait_for(lambda m: m["type"] == "registered", 30)
    registered = time.monotonic()
    launch = ws.wait_for(lambda m: m["type"] == "launch", 60)
    job = launch["job_id"]
    to_launch = time.monotonic() - registered
    seq = 0
    for w in launch["workers"]:
        seq += 1
        ws.send_json({"type": "worker_started", "seq": seq, "job_id": str(job),
                      "attempt": launch["attempt"], "rank": w["rank"], "pid": 1000 + w["rank"]})
    ws.wait_for(lambda m: m["type"] == "ack" and m["seq"] >= seq, 60)
    names = [f"layer{i:03d}.grad_norm" for i in range(nmetrics)]
    texts = {}  # (7k + rank) mod 1000 -> the report's values as JSON members
    attempt = launch["attempt"]
    first_report = seq + 1
    acked = seq
    k = 0
    start = time.monotonic()
    stop_at = start + seconds
    last_ack = start
    while True:
        now = time.monotonic()
        sending = now < stop_at
        while sending and seq - acked < window:
            k += 1
            ms = int(time.time() * 1000)
            t = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + \
                f".{ms % 1000:03d}Z"
            for rank in range(ranks):
                seq += 1
                # the values depend on (7k + rank) mod 1000: each text is made once (the load
                # generator shares the cores with the server; it is not what is measured)
                phase = (k * 7 + rank) % 1000
                values = texts.get(phase)
                if values is None:
                    values = texts[phase] = ",".join(f'"{n}":{(phase + i) % 1000 / 997.0}'
                                                     for i, n in enumerate(names))
                send_raw(ws.sock, f'{{"type":"report","seq":{seq},"job_id":"{job}",'
                                  f'"attempt":{attempt},"rank":{rank},"report_seq":{k},'
                                  f'"metrics":{{{values}}},"step":{k},"time":"{t}",'
                                  f'"checkpoint_dir":null}}')
        if not sending and acked >= seq:
            break
        m = ws.recv_json(timeout=60)
        if m.get("type") == "ack":
            acked = max(acked, m["seq"])
            last_ack = time.monotonic()
    ws.close()
    out.put((acked - first_report + 1, start, last_ack, to_launch, delay))


def psql_command(pg, db, command):
    """Runs one psql meta-command (\\copy): harness's pg.psql sends SQL only (pgwire.py)."""
    subprocess.run(["psql", "-h", pg.sockdir, "-U", "trainyard", "-d", db, "-XAtq",
                    "-v", "ON_ERROR_STOP=1", "-c", command], check=True)


def copy_ceiling(pg, db, jobs, copy_job, workdir, trigger=True):
    """Seconds for psql \\copy of the rows the server stored for `jobs` (the same reports rows,
    numbers and all, renumbered as rank 0 of `copy_job`) back into `reports`; and their count.
    The table's one trigger, reports_added (migration 0050: report_names and report_series, what
    every writer pays; report_blocks is the leader's maintenance's, off every writer's path), runs
    as for any writer; trigger False: the bare COPY, with the table's triggers disabled (all but
    the foreign keys' checks; in builds before 0050 these were report_names and report_blocks)."""
    path = os.path.join(workdir, "reports.copy")
    os.chmod(workdir, 0o755)
    ids = ",".join(str(j) for j in jobs)
    psql_command(pg, db, f"\\copy (SELECT {copy_job}, attempt, 0, row_number() OVER (), step, "
                 f"node_id, reported_at, metrics FROM reports WHERE job_id IN ({ids})) TO '{path}'")
    rows = sum(1 for _ in open(path))
    if not trigger:
        pg.psql("ALTER TABLE reports DISABLE TRIGGER USER", db=db)
    t0 = time.monotonic()
    psql_command(pg, db, f"\\copy reports (job_id, attempt, rank, seq, step, node_id, "
                 f"reported_at, metrics) FROM '{path}'")
    took = time.monotonic() - t0
    if not trigger:
        pg.psql("ALTER TABLE reports ENABLE TRIGGER USER", db=db)
    return took, rows


def blocks_caught_up(pg, db):
    """Seconds until the leader's maintenance has summed up every complete block of 16."""
    start = time.monotonic()
    while int(pg.psql("SELECT count(*) FROM report_series WHERE seq_max >> 4 > block_next",
                      db=db)):
        time.sleep(0.05)
    return time.monotonic() - start


def old_table_copy(pg, db, jobs, workdir):
    """Seconds for psql \\copy of the same points into a table shaped as the per-number `metrics`
    table was before migration 0022 (one row per number, its key and its index); and the count."""
    path = os.path.join(workdir, "points.copy")
    ids = ",".join(str(j) for j in jobs)
    pg.psql("CREATE TABLE old_metrics (job_id bigint NOT NULL REFERENCES jobs (id), "
            "attempt integer NOT NULL, rank integer NOT NULL, seq bigint NOT NULL, "
            "name text NOT NULL, step bigint, value double precision NOT NULL, "
            "reported_at timestamptz NOT NULL, PRIMARY KEY (job_id, attempt, rank, seq, name)); "
            "CREATE INDEX old_metrics_name_idx ON old_metrics (job_id, name, rank, reported_at)",
            db=db)
    psql_command(pg, db, f"\\copy (SELECT * FROM metrics WHERE job_id IN ({ids})) TO '{path}'")
    points = sum(1 for _ in open(path))
    t0 = time.monotonic()
    psql_command(pg, db, f"\\copy old_metrics FROM '{path}'")
    return time.monotonic() - t0, points


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--agents", type=int, default=4)
    ap.add_argument("--ranks", type=int, default=4, help="workers per agent (one job each)")
    ap.add_argument("--metrics", type=int, default=100, help="numbers per report")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--window", type=int, default=2048, help="unacked events per agent")
    ap.add_argument("--late", type=float, default=1.0,
                    help="the last agent registers this many seconds after the others, during "
                         "their flood: how long its job waits to be placed (0: all at once)")
    ap.add_argument("--copies", type=int, default=3,
                    help="runs of the bare COPY; the ratio is to their median")
    ap.add_argument("--statements", type=int, default=0,
                    help="print the N statements PostgreSQL spent most time in during the "
                         "server's ingest (pg_stat_statements, nested ones included)")
    a = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="ty-bench-ingest-")
    pg = DurableCluster(statements=a.statements > 0).start()
    srv = None
    try:
        db = pg.create_database()
        srv = harness.Server(database_url=pg.url(db),
                             extra_args=("--heartbeat-timeout-s", "600")).start()
        token = open(os.path.join(srv.data_dir, "cluster.token")).read().strip()
        jobs = [srv.submit({"name": f"ingest-{i}", "entrypoint": ["true"],
                            "scaling_config": {"num_workers": a.ranks}})["id"]
                for i in range(a.agents)]
        if a.statements:
            pg.psql("CREATE EXTENSION pg_stat_statements; SELECT pg_stat_statements_reset()",
                    db=db)
        out = multiprocessing.Queue()
        procs = [multiprocessing.Process(target=agent_main,
                                         args=(srv.ws_url, token, f"bench-{i}", a.ranks,
                                               a.metrics, a.seconds, a.window,
                                               a.late if i == a.agents - 1 else 0.0, out))
                 for i in range(a.agents)]
        for p in procs:
            p.start()
        results = [out.get(timeout=a.seconds + a.late + 300) for _ in procs]
        failed = [r for r in results if isinstance(r, str)]
        if failed:
            raise SystemExit("a simulated agent failed: " + "; ".join(failed))
        results_late = max(r[3] for r in results if r[4] > 0) if a.late > 0 else 0.0
        # report_blocks is the leader's maintenance's (migrations 0047, 0050): how long after the
        # last ack until every complete block of 16 is summed up.
        catchup = blocks_caught_up(pg, db)
        for p in procs:
            p.join()
        if a.statements:
            print(pg.psql("SELECT calls, round(total_exec_time::numeric), "
                          "round((total_exec_time / calls)::numeric, 3), "
                          "left(regexp_replace(query, '\\s+', ' ', 'g'), 120) "
                          "FROM pg_stat_statements ORDER BY total_exec_time DESC "
                          f"LIMIT {a.statements}", db=db))
            print("(calls | ms | ms per call | statement)")
        reports = sum(r[0] for r in results)
        elapsed = max(r[2] for r in results) - min(r[1] for r in results)
        points = reports * a.metrics
        stored = int(pg.psql("SELECT count(*) FROM metrics", db=db))
        streamed = int(pg.psql("SELECT count(*) FROM job_stream WHERE kind = 'report'", db=db))
        assert stored == points, (stored, points)
        assert streamed == reports, (streamed, reports)
        server_rate = points / elapsed
        # A job of its own (it stays PENDING: the agents' nodes are full) for the COPY rows.
        copy_job = srv.submit({"name": "copy", "entrypoint": ["true"]})["id"]
        copy_s, copy_rows = copy_ceiling(pg, db, jobs, copy_job, workdir)
        copy_rate = copy_rows * a.metrics / copy_s
        print(f"machine: {os.cpu_count()} cores; {a.agents} agents x {a.ranks} ranks, "
              f"{a.metrics} metrics per report, {a.seconds:.0f} s, window {a.window}")
        print(f"through trainyard-server: {points} points ({reports} reports) committed and acked "
              f"in {elapsed:.2f} s = {server_rate:,.0f} points/s (goal >= 200,000)")
        print(f"PostgreSQL COPY of the same rows into reports: {copy_rows} rows "
              f"({copy_rows * a.metrics} points) in {copy_s:.2f} s = {copy_rate:,.0f} points/s")
        print(f"ratio server / COPY: {server_rate / copy_rate:.2f}")
        copy_catchup = blocks_caught_up(pg, db)  # not to run during the bare COPY below
        if a.late > 0 and a.agents > 1:
            print(f"the last agent registered {a.late:.1f} s after the others, during their "
                  f"flood; its job's launch came {results_late:.3f} s after its registration")
        print(f"the leader's maintenance summed up the blocks {catchup:.2f} s after the last ack: "
              f"{points / (elapsed + catchup):,.0f} points/s with it (those of the COPY's rows: "
              f"{copy_catchup:.2f} s after it)")
        # COPY's own rate moves by a third between runs on a shared machine: the median of
        # --copies runs, each into a job of its own
        bare_rates = []
        for _ in range(a.copies):
            bare_job = srv.submit({"name": "copy-bare", "entrypoint": ["true"]})["id"]
            bare_s, bare_rows = copy_ceiling(pg, db, jobs, bare_job, workdir, trigger=False)
            bare_rates.append(bare_rows * a.metrics / bare_s)
        bare_rate = statistics.median(bare_rates)
        print(f"the same COPY with the table's triggers disabled, the bare COPY "
              f"({', '.join(f'{r:,.0f}' for r in bare_rates)}), median: {bare_rate:,.0f} "
              f"points/s; ratio server / that COPY: {server_rate / bare_rate:.2f}")
        old_s, old_points = old_table_copy(pg, db, jobs, workdir)
        print(f"(before migration 0022) PostgreSQL COPY of the same points into a per-number "
              f"table: {old_points} rows in {old_s:.2f} s = {old_points / old_s:,.0f} points/s")
        print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    finally:
        if srv:
            srv.stop()
        pg.stop()
        subprocess.run(["rm", "-rf", workdir])


if __name__ == "__main__":
    main()
