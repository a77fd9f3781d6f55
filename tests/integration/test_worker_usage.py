"""Issue 22 (feeding issue 26): each worker's CPU and memory use, read by its agent from the
worker's cgroup every second (agent message `usage`), reach the server and the user: GET
/api/v1/jobs/{id}/workers gives each worker's `usage` while it runs, and its totals once it ended
(the agent's final sample); `trainyard workers` shows them as columns."""
import os
import tempfile
import textwrap

import harness
from test_isolation_procs import require_cgroups


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


def test_a_workers_cpu_and_memory_reach_the_api_and_cli_and_its_totals_stay(server,
                                                                          agent_factory, cli):
    agent = agent_factory()
    require_cgroups(agent)
    gate = tempfile.mkdtemp(prefix="ty-usage-")
    os.chmod(gate, 0o755)
    go = os.path.join(gate, "go")
    job = server.submit({"name": "burner", "entrypoint": [PY, "-c", BURNER, go],
                         "working_dir": "/tmp"})["id"]
    server.wait_job(job, {"RUNNING"})

    # While it runs: its CPU time and the memory it holds, from samples of its cgroup.
    live = harness.wait_for(
        lambda: (lambda u: u if u and u["memory_bytes"] >= 120 * MB
                 and u["cpu_seconds"] > 0.5 else None)(usage_of(server, job)),
        what="the worker's usage with its CPU time and 128 MiB")
    assert live["memory_peak_bytes"] >= live["memory_bytes"]
    assert live["final"] is False
    assert live["sampled_at"].endswith("Z") or "+" in live["sampled_at"], live

    # The CLI shows them as columns.
    r = cli("workers", str(job))
    assert r.returncode == 0, r.stderr
    header, row = r.stdout.splitlines()[:2]
    assert header.split()[-3:] == ["CPU", "MEM", "MEM_PEAK"], r.stdout
    cpu, mem, peak = row.split()[-3:]
    assert cpu.endswith("s") and float(cpu[:-1]) > 0.5, r.stdout
    assert mem.endswith("MiB") and float(mem[:-3]) >= 120, r.stdout
    assert float(peak[:-3]) >= float(mem[:-3]), r.stdout

    # Once it ended, its totals stay: the final sample, taken at its exit.
    open(go, "w").close()
    done = server.wait_job(job, {"SUCCEEDED", "FAILED"})
    assert done["status"] == "SUCCEEDED", done
    final = harness.wait_for(lambda: (lambda u: u if u and u["final"] else None)(
        usage_of(server, job)), what="the worker's final usage sample")
    assert final["cpu_seconds"] >= live["cpu_seconds"] > 0.5
    assert final["memory_peak_bytes"] >= 120 * MB
    os.remove(go)
    os.rmdir(gate)

