"""Issue 14, finding 10: the agent's event queue is bounded. While the server is away, the
events an agent holds for it (reports, log chunks) grow only to --max-queued-bytes; past that the
agent stops reading its workers' report connections, so their report() waits for its ack instead
of the agent's memory and spool growing. When the server is back, nothing is lost."""
import os
import signal
import textwrap
import time

import harness

REPORTS = 120
WORKER = textwrap.dedent(f"""
    import os, trainyard
    done = os.path.join(os.environ["TY_TEST_OUT"], "done")
    for k in range(1, {REPORTS} + 1):
        trainyard.report({{"loss": 1.0 / k, "pad_" + "x" * 200: float(k), "step": k}})
        with open(done + ".tmp", "w") as f:
            f.write(str(k))
        os.replace(done + ".tmp", done)
""")


def reports_done(out):
    try:
        with open(os.path.join(out, "done")) as f:
            return int(f.read() or 0)
    except FileNotFoundError:
        return 0


def wait_for(cond, what, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_reports_wait_while_the_queue_is_full_and_none_is_lost(server, agent_factory):
    srv = server
    agent = agent_factory(env={"TRAINYARD_AGENT_MAX_QUEUED_BYTES": "8192"})
    work = harness.make_tmpdir("ty-queue-")
    out = harness.make_tmpdir("ty-queue-out-")
    os.chmod(out, 0o777)
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write("import time\ntime.sleep(1)\n" + WORKER)
    job = srv.submit({"name": "queue-cap", "entrypoint": ["/usr/bin/python3", "train.py"],
                      "working_dir": work, "env": {"TY_TEST_OUT": out}})["id"]
    srv.wait_job(job, {"RUNNING"})
    srv.stop(signal.SIGKILL)
    # With nobody acking, the agent holds at most ~8 KiB of events (each report is ~350 bytes):
    # the worker's reports stop returning well before all of them are made.
    wait_for(lambda: "workers' reports wait" in agent.log_text(), "the agent to hold reports")
    held_at = reports_done(out)
    time.sleep(2)
    assert reports_done(out) == held_at < REPORTS, (held_at, REPORTS)
    srv.start()
    assert srv.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    assert "reading reports again" in agent.log_text()
    pts = srv.request("GET", f"/api/v1/jobs/{job}/metrics?name=loss&max_points=1000")
    assert pts.status == 200, pts
    assert sorted(p["step"] for p in pts.json["metrics"]) == list(range(1, REPORTS + 1))
