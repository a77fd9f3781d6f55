"""Issue 26: each worker's CPU and memory over time, kept by the server (one sample per worker
about every 10 s, and its final one: worker_usage_samples) and read back through GET
/api/v1/jobs/{id}/usage (per rank, with each sample's CPU %) and GET /api/v1/nodes/{id}/usage
(the node's workers together), which the dashboard's System tab and node cards draw. Each kept
sample is also a `usage` row of the job's /stream; samples are thinned as they pass an hour of age
and the stream's usage rows go."""
import os
import tempfile
import textwrap

import harness
from test_isolation_procs import require_cgroups
from test_metrics import db_name
from test_stream import Sub

PY = "/usr/bin/python3"
MB = 1 << 20

# About half a second of CPU, then 64 MiB touched and held until the test lets it go.
HOLDER = textwrap.dedent("""
    import os, sys, time
    t = time.process_time()
    while time.process_time() - t < 0.5:
        pass
    block = bytearray(64 << 20)
    for i in range(0, len(block), 4096):
        block[i] = 1
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.05)
""")


def usage(server, path):
    r = server.request("GET", path)
    assert r.status == 200, r
    return r.json["usage"]


def test_a_workers_usage_series_and_its_nodes_totals(server, agent_factory, pg):
    agent = agent_factory()
    require_cgroups(agent)
    node = agent.node_id
    gate = tempfile.mkdtemp(prefix="ty-usage-series-")
    os.chmod(gate, 0o755)
    go = os.path.join(gate, "go")
    job = server.submit({"name": "holder", "entrypoint": [PY, "-c", HOLDER, go],
                         "working_dir": "/tmp"})["id"]
    server.wait_job(job, {"RUNNING"})

    # A worker's first sample is kept at once (none 10 s before it), with its CPU % since start.
    live = harness.wait_for(
        lambda: [u for u in usage(server, f"/api/v1/jobs/{job}/usage")
                 if u["memory_bytes"] >= 60 * MB] or None,
        what="a usage sample of the worker holding 64 MiB")
    u = live[-1]
    assert (u["attempt"], u["rank"], u["node_id"]) == (1, 0, node), u
    assert u["cpu_percent"] is not None and u["cpu_percent"] >= 0 and u["cpu_seconds"] > 0.3, u
    assert u["time"].endswith("Z"), u

    # The same sample reached the job's /stream subscribers as a `usage` row.
    sub = Sub(server)
    sub.subscribe(job)
    ev = sub.read_until(lambda m: m["type"] == "event" and m["kind"] == "usage"
                        and m["data"]["time"] == u["time"])
    sub.close()
    assert (ev["attempt"], ev["rank"]) == (1, 0) and ev["data"] == u, (ev, u)

    # The node's chart: its workers summed per 10 s.
    buckets = harness.wait_for(
        lambda: [b for b in usage(server, f"/api/v1/nodes/{node}/usage?minutes=5")
                 if b["memory_bytes"] >= 60 * MB] or None,
        what="the node's usage bucket with the worker's memory")
    assert buckets[-1]["workers"] == 1 and buckets[-1]["cpu_percent"] >= 0, buckets

    # Samples an hour old are thinned to one a minute by the next write of the worker (its final
    # sample here), and its stream's usage rows over an hour old go.
    db = db_name(server)
    pg.psql(f"INSERT INTO worker_usage_samples SELECT {job}, 1, 0, b + s * interval '1 second', "
            f"'{node}', 0, 0 FROM (SELECT date_trunc('minute', now()) - interval '61 minutes' AS b) "
            "x, unnest(ARRAY[1, 20, 40]) s", db=db)
    pg.psql(f"UPDATE job_stream SET at = now() - interval '2 hours' WHERE job_id = {job} "
            "AND kind = 'usage'", db=db)
    # Once it ended, its final sample joins the series (kept however soon after the last).
    open(go, "w").close()
    assert server.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    series = harness.wait_for(
        lambda: (lambda s: s if len(s) >= 2 and s[-1]["cpu_seconds"] >= u["cpu_seconds"]
                 else None)(usage(server, f"/api/v1/jobs/{job}/usage?attempt=1")),
        what="the worker's final usage sample in its series")
    times = [s["time"] for s in series]
    assert times == sorted(times) and len(set(times)) == len(times), series
    cpu = [s["cpu_seconds"] for s in series]
    assert cpu == sorted(cpu), series
    # Thinned to one sample per series: the last one.
    thin = usage(server, f"/api/v1/jobs/{job}/usage?max_points=1")
    assert [s["time"] for s in thin] == [series[-1]["time"]], thin
    assert usage(server, f"/api/v1/jobs/{job}/usage?attempt=2") == []
    old = pg.psql(f"SELECT count(*) FROM worker_usage_samples WHERE job_id = {job} "
                  "AND sampled_at < now() - interval '1 hour'", db=db)
    assert int(old) == 1, old
    aged = pg.psql(f"SELECT count(*) FROM job_stream WHERE job_id = {job} AND kind = 'usage' "
                   "AND at < now() - interval '1 hour'", db=db)
    assert int(aged) == 0, aged
    os.remove(go)
    os.rmdir(gate)

    # Bad input: a 4xx problem naming it.
    for path, status, field in [
            (f"/api/v1/jobs/{job}/usage?attempt=0", 400, "attempt"),
            (f"/api/v1/jobs/{job}/usage?max_points=0", 400, "max_points"),
            (f"/api/v1/nodes/{node}/usage?minutes=x", 400, "minutes"),
            ("/api/v1/jobs/999999/usage", 404, None),
            ("/api/v1/nodes/no-such-node/usage", 404, None)]:
        r = server.request("GET", path)
        assert r.status == status, (path, r)
        assert r.headers["Content-Type"].startswith("application/problem+json"), (path, r)
        if field:
            assert field in r.text, (path, r.text)
