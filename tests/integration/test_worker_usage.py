"""Issue 22 (feeding issue 26): each worker's CPU and memory use, read by its agent from the
worker's cgroup every second (agent message `usage`), reach the server and the user: GET
/api/v1/jobs/{id}/workers gives each worker's `usage` while it runs, and its totals once it ended
(the agent's final sample); `trainyard workers` shows them as columns, /metrics as
trainyard_worker_* series to those who may see the job. Another node cannot write a worker's
usage."""
import os
import tempfile
import textwrap

from prometheus_client.parser import text_string_to_metric_families

import harness
from test_isolation_procs import require_cgroups
from test_security import cluster_token, register_msg
from wsclient import WebSocket


PY = "/usr/bin/python3"
MB = 1 << 20

# About 1 s of CPU, then 128 MiB touched and held until the test lets it go (a file appears).
BURNER = textwrap.dedent("""
    import os, sys, time
    t = time.process_time()
    x = 0
    while time.process_time() - t < 1.2:
        x += 1
    block = bytearray(128 << 20)
    for i in range(0, len(block), 4096):
        block[i] = 1
    print("HOLDING", flush=True)
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.05)
    print("done", len(block), flush=True)
""")


def usage_of(server, job):
    [w] = server.request("GET", f"/api/v1/jobs/{job}/workers").json["workers"]
    return w["usage"]


def worker_series(server, job, token="admin"):
    """{sample name: value} of the trainyard_worker_* series of job's rank 0 in GET /metrics."""
    r = server.request("GET", "/metrics", token=token)
    assert r.status == 200, r
    return {s.name: s.value for fam in text_string_to_metric_families(r.text)
            for s in fam.samples if s.name.startswith("trainyard_worker_")
            and s.labels.get("job") == str(job) and s.labels.get("rank") == "0"}


def test_a_workers_cpu_and_memory_reach_the_api_and_cli_and_its_totals_stay(server,
                                                                          agent_factory, cli):
    agent = agent_factory()
    require_cgroups(agent)
    gate = tempfile.mkdtemp(prefix="ty-usage-")
    os.chmod(gate, 0o755)
    go = os.path.join(gate, "go")
    # In a private project: its usage is shown to admins and members only.
    r = server.request("POST", "/api/v1/projects", {"name": "lab", "visibility": "private"})
    assert r.status == 201, r
    viewer = server.create_token("outsider", "viewer")
    job = server.submit({"name": "burner", "entrypoint": [PY, "-c", BURNER, go],
                         "working_dir": "/tmp", "project": "lab"})["id"]
    server.wait_job(job, {"RUNNING"})

    # While it runs: its CPU time and the memory it holds, from samples of its cgroup.
    live = harness.wait_for(
        lambda: (lambda u: u if u and u["memory_bytes"] >= 120 * MB
                 and u["cpu_seconds"] > 0.5 else None)(usage_of(server, job)),
        what="the worker's usage with its CPU time and 128 MiB")
    assert live["memory_peak_bytes"] >= live["memory_bytes"]
    assert live["final"] is False
    assert live["sampled_at"].endswith("Z") or "+" in live["sampled_at"], live

    # /metrics has them as series of the running worker, for those who may see its job.
    series = worker_series(server, job)
    assert series["trainyard_worker_cpu_seconds_total"] > 0.5, series
    assert series["trainyard_worker_memory_bytes"] >= 120 * MB, series
    assert worker_series(server, job, token=viewer) == {}

    # The CLI shows them as columns.
    r = cli("workers", str(job))
    assert r.returncode == 0, r.stderr
    header, row = r.stdout.splitlines()[:2]
    assert header.split()[-3:] == ["CPU", "MEM", "MEM_PEAK"], r.stdout
    cpu, mem, peak = row.split()[-3:]
    assert cpu.endswith("s") and float(cpu[:-1]) > 0.5, r.stdout
    assert mem.endswith("MiB") and float(mem[:-3]) >= 120, r.stdout
    assert float(peak[:-3]) >= float(mem[:-3]), r.stdout

    # Another node cannot write the worker's usage (CPU time and peak only ever go up, so a
    # forged sample that was stored would show in the totals below).
    with WebSocket(server.ws_url + "/agent") as ws:
        ws.send_json(register_msg("rogue-node", cluster_token(server)))
        reply = ws.wait_for(lambda m: m["type"] in ("registered", "error"))
        assert reply["type"] == "registered", reply
        ws.send_json({"type": "usage", "workers": [
            {"job_id": str(job), "attempt": 1, "rank": 0, "cpu_usec": 10 ** 12,
             "memory_bytes": 1 << 50, "memory_peak_bytes": 1 << 50, "final": True}]})
        # Messages are handled in order: once this event is acked the usage was handled.
        ws.send_json({"type": "worker_exited", "seq": 1, "job_id": str(job), "attempt": 1,
                      "rank": 0, "exit_code": 0, "signal": None, "error": None})
        ws.wait_for(lambda m: m["type"] == "ack" and m["seq"] == 1)
    forged = usage_of(server, job)
    assert forged["final"] is False and forged["cpu_seconds"] < 1000, forged

    # Once it ended, its totals stay: the final sample, taken at its exit.
    open(go, "w").close()
    done = server.wait_job(job, {"SUCCEEDED", "FAILED"})
    assert done["status"] == "SUCCEEDED", done
    final = harness.wait_for(lambda: (lambda u: u if u and u["final"] else None)(
        usage_of(server, job)), what="the worker's final usage sample")
    assert final["cpu_seconds"] >= live["cpu_seconds"] > 0.5
    assert worker_series(server, job) == {}  # the series are of running workers only
    assert final["cpu_seconds"] < 1000 and 120 * MB <= final["memory_peak_bytes"] < 1 << 40
    os.remove(go)
    os.rmdir(gate)

