"""Issue 23, point 1: checkpoints and code reach the server when the agent is given only
--server, and a wrong REST URL says so. Before, the agent uploaded and fetched at "--server's
host, port 8080": with the server on other ports every checkpoint stayed unstored and a
working_dir job failed, nothing naming the URL. Now the server names its REST URL in
`registered`; --api-url still overrides it, and a failed upload is, within seconds, an event of
the job naming the URL and the error and the node's artifact-store-unreachable condition, cleared
by the next upload that works. Real server, agents and python workers."""
import os
import secrets
import signal
import textwrap

import harness
from test_ha import wait_role
from test_checkpoints import checkpoints

PY = "/usr/bin/python3"

# Reports one checkpoint (one file) and exits.
WRITER = textwrap.dedent("""
    import os, shutil, tempfile
    import trainyard
    d = tempfile.mkdtemp(prefix="ty-url-")
    with open(os.path.join(d, "weights.txt"), "w") as f:
        f.write("weights")
    trainyard.report({"loss": 0.5, "step": 1}, checkpoint=d)
    shutil.rmtree(d)
""")


def dbname(database):
    return next(w.split("=", 1)[1] for w in database.split() if w.startswith("dbname="))


def stored(server, job):
    """The job's first checkpoint once its artifact is complete, else None."""
    cks = checkpoints(server, job)
    return cks[0] if cks and (cks[0].get("artifact") or {}).get("state") == "complete" else None


def store_condition(server, node_id):
    node = server.request("GET", f"/api/v1/nodes/{node_id}").json
    return next((c for c in node.get("conditions", [])
                 if c["type"] == "artifact-store-unreachable"), None)


def test_agent_uploads_where_the_server_says_and_a_wrong_api_url_is_named(server):
    assert server.port != 8080  # the old default would miss it
    # (a) only --server: the code package is fetched and the checkpoint stored.
    a = harness.Agent(server, cpus=1, api_url=None).start()
    work = harness.make_tmpdir("ty-url-")
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(WRITER)
    job = server.submit({"name": "only-server", "entrypoint": [PY, "train.py"],
                         "working_dir": work})["id"]
    done = server.wait_job(job, {"SUCCEEDED", "FAILED"})
    assert done["status"] == "SUCCEEDED", (done, a.log_text())
    harness.wait_for(lambda: stored(server, job), timeout=30, what="checkpoint stored")
    assert store_condition(server, a.node_id) is None
    assert a.stop() == 0

    # (b) the same node (its data directory) with a wrong --api-url, a closed port: the job's
    # events name it and the error at once.
    closed = f"http://127.0.0.1:{harness.free_port()}"
    b = a
    b.api_url = closed
    b.start()
    job2 = server.submit({"name": "wrong-url", "entrypoint": [PY, "-c", WRITER]})["id"]
    done = server.wait_job(job2, {"SUCCEEDED", "FAILED"})
    assert done["status"] == "SUCCEEDED", (done, b.log_text())

    def named():
        events = server.request("GET", f"/api/v1/jobs/{job2}/events").json["events"]
        return next((e["message"] for e in events
                     if f"upload to {closed}/api/v1/" in (e.get("message") or "")), None)
    msg = harness.wait_for(named, timeout=20, what="an event naming the URL")
    assert "checkpoint 1 upload to" in msg and "failed: " in msg and "(retrying)" in msg, msg
    assert "connect" in msg.lower(), msg  # curl's reason: the port is closed
    cond = harness.wait_for(lambda: store_condition(server, b.node_id), timeout=20,
                            what="the node's condition")
    assert closed in cond["message"] and cond["since"], cond
    assert stored(server, job2) is None

    # The same node without the override: the queued upload goes where the server says, and the
    # condition is cleared.
    assert b.stop() == 0
    b.api_url = None
    b.start()
    harness.wait_for(lambda: stored(server, job2), timeout=30, what="checkpoint stored")
    harness.wait_for(lambda: store_condition(server, b.node_id) is None, timeout=20,
                     what="the condition cleared")
    assert b.stop() == 0


def test_ha_uploads_follow_the_leader_then_the_next_server(pg, database):
    """Two servers with --public-url on one database; the agent is given only the follower (B).
    `registered` names the leader (A) first, then B: uploads go to A; A killed, the next upload
    fails there once and goes to B. Before, the agent uploaded to --server's host on port 8080."""
    token = "tyc_" + secrets.token_hex(20)
    artifacts = harness.make_tmpdir("ty-url-art-")
    servers = []
    for _ in range(2):
        s = harness.Server(database_url=database, env={"TRAINYARD_CLUSTER_TOKEN": token},
                           extra_args=["--artifact-dir", artifacts, "--heartbeat-timeout-s", "4"])
        s.args += ["--public-url", s.url]
        servers.append(s.start())
        wait_role(s, "leader" if len(servers) == 1 else "follower")
    a, b = servers
    b.admin_token = a.admin_token
    leader_row = "SELECT string_agg(url, ' ' ORDER BY url) FROM servers WHERE leader"
    harness.wait_for(lambda: pg.psql(leader_row, db=dbname(database)) == a.url, timeout=20,
                     what="the leader's row")
    agent = harness.Agent(b, cpus=1, api_url=None).start(token=token)
    try:
        assert f"checkpoints go to {a.url} (then {b.url})" in agent.log_text()
        a.proc.send_signal(signal.SIGKILL)
        a.proc.wait()
        wait_role(b, "leader")
        job = b.submit({"name": "after-failover", "entrypoint": [PY, "-c", WRITER]})["id"]
        done = b.wait_job(job, {"SUCCEEDED", "FAILED"})
        assert done["status"] == "SUCCEEDED", (done, agent.log_text())
        harness.wait_for(lambda: stored(b, job), timeout=30, what="checkpoint stored on B")
        events = [e["message"] for e in
                  b.request("GET", f"/api/v1/jobs/{job}/events").json["events"]]
        assert any(f"upload to {a.url}/api/v1/" in (m or "") for m in events), events
        harness.wait_for(lambda: store_condition(b, agent.node_id) is None, timeout=20,
                         what="the condition cleared")
    finally:
        assert agent.stop() == 0
        assert b.stop() == 0, b.log_text()
