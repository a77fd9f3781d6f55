#!/usr/bin/python3
"""What batched delivery saves a client that pays per message (docs/streams.md, "Batched
delivery"): a Python subscriber (tests/integration/wsclient.py, one json.loads per message) reads
--rows report rows of one job from the start, once unbatched and once with "batch": true, in
alternation; prints the seconds and the client's own CPU seconds for each.

    /usr/bin/python3 bench/stream_client_cost.py --rows 50000 --rounds 3

Starts PostgreSQL and one trainyard-server (bench/launch_cluster.py). Not a test.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_cluster as lc  # noqa: E402


def read_all(srv, ws_cls, job, last, batch):
    ws = ws_cls(srv.ws_url + "/stream", subprotocol="trainyard-stream.v1")
    ws.send_json({"type": "auth", "token": srv.admin_token})
    ws.send_json({"type": "subscribe", "job": job, "after": 0, "batch": batch})
    t0, c0 = time.monotonic(), time.process_time()
    seq, frames = 0, 0
    while seq < last:
        msg = json.loads(ws.recv_text(timeout=60))
        frames += 1
        for e in msg["events"] if msg["type"] == "events" else [msg]:
            if e["type"] == "event":
                assert e["seq"] == seq + 1, (e["seq"], seq)
                seq = e["seq"]
    wall, cpu = time.monotonic() - t0, time.process_time() - c0
    ws.close()
    return wall, cpu, frames


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.environ.get("TY_BUILD_DIR") or
                    os.path.join(lc.ROOT, "build"))
    ap.add_argument("--rows", type=int, default=50000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    lc.use_build(a.build)
    lc.import_harness()
    from wsclient import WebSocket
    cluster = lc.Cluster(db="external")
    with cluster:
        srv = cluster.server
        job = srv.submit({"name": "cost", "entrypoint": ["true"]})["id"]
        db = cluster.dbname
        cluster.pg.psql(
            "SELECT ty_stream_append_batch((SELECT jsonb_agg(jsonb_build_object('job_id', "
            f"{job}, 'kind', 'report', 'attempt', 1, 'rank', 0, 'body', jsonb_build_object("
            "'k', g, 'step', g, 'metrics', (SELECT jsonb_object_agg('m' || m, m * 1.5) "
            f"FROM generate_series(1, 20) m))) ORDER BY g) FROM generate_series(1, {a.rows}) g)); "
            "NOTIFY ty_stream",  # a writer other than the server tells it, as a peer server does
            db=db)
        last = int(cluster.pg.psql(f"SELECT stream_seq FROM jobs WHERE id = {job}", db=db))
        print(f"# {lc.machine_caveats()}")
        for r in range(a.rounds):
            for batch in (False, True):
                wall, cpu, frames = read_all(srv, WebSocket, job, last, batch)
                print(f"round={r + 1} batch={int(batch)} events={last} frames={frames} "
                      f"seconds={wall:.2f} client_cpu_s={cpu:.2f} events_per_s={last / wall:.0f}")


if __name__ == "__main__":
    main()
