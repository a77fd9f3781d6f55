"""Checkpoints: the agent takes over the directories passed to trainyard.report(), the server
registers checkpoint k once every rank made its k-th report (DESIGN.md section 4), and
GET /api/v1/jobs/{id}/checkpoints lists them. End to end: a real agent, Python workers."""
import json
import os
import textwrap
import time

import harness

PY = "/usr/bin/python3"

WORKER = textwrap.dedent("""
    import os, shutil, tempfile
    import trainyard
    rank = trainyard.get_context().get_world_rank()
    for k in range(1, 4):
        d = tempfile.mkdtemp(prefix=f"ty-ck-{rank}-")
        with open(os.path.join(d, f"rank-{rank}.txt"), "w") as f:
            f.write(f"rank {rank} round {k}")
        os.mkdir(os.path.join(d, "sub"))
        with open(os.path.join(d, "sub", f"part-{rank}.bin"), "wb") as f:
            f.write(b"x" * (100 * (rank + 1)))
        trainyard.report({"loss": 1.0 / k + rank, "step": 10 * k}, checkpoint=d)
        shutil.rmtree(d)  # the agent owns its copy once report() returned
""")


def checkpoints(srv, job):
    r = srv.request("GET", f"/api/v1/jobs/{job}/checkpoints")
    assert r.status == 200, r
    return r.json["checkpoints"]


def wait_checkpoints(srv, job, n, timeout=30):
    deadline = time.time() + timeout
    got = []
    while time.time() < deadline:
        got = checkpoints(srv, job)
        if len(got) >= n:
            return got
        time.sleep(0.1)
    return got


def submit(srv, script, name, workers=2):
    work = harness.make_tmpdir("ty-ckpt-")
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(script)
    return srv.submit({"name": name, "entrypoint": [PY, "train.py"], "working_dir": work,
                       "scaling_config": {"num_workers": workers}})["id"]


def test_checkpoints_of_two_ranks_are_merged_registered_and_listed(server, agent_factory):
    srv = server
    agent = agent_factory(cpus=2)
    job = submit(srv, WORKER, "ckpt-e2e")
    done = srv.wait_job(job, {"SUCCEEDED", "FAILED"})
    assert done["status"] == "SUCCEEDED", (done, agent.worker_log(job, 0), agent.worker_log(job, 1))
    cks = wait_checkpoints(srv, job, 3)
    assert [c["index"] for c in cks] == [1, 2, 3], cks
    assert [c["step"] for c in cks] == [10, 20, 30]
    assert [c["metrics"] for c in cks] == [{"loss": 1.0}, {"loss": 0.5}, {"loss": 1.0 / 3}]
    for c in cks:
        assert c["attempt"] == 1 and c["id"] >= 1 and c["created_at"].endswith("Z")
        assert len(c["location"]) == 1, c
        loc = c["location"][0]
        assert loc["node_id"] == agent.node_id
        expect = os.path.join(os.path.realpath(agent.data_dir), "checkpoints", str(job), "1",
                              str(c["index"]))
        assert loc["path"] == expect
        for rank in (0, 1):
            with open(os.path.join(expect, f"rank-{rank}.txt")) as f:
                assert f.read() == f"rank {rank} round {c['index']}"
            assert os.path.getsize(os.path.join(expect, "sub", f"part-{rank}.bin")) == \
                100 * (rank + 1)
        size = sum(len(f"rank {r} round {c['index']}") + 100 * (r + 1) for r in (0, 1))
        assert c["size_bytes"] == size
    latest = srv.request("GET", f"/api/v1/jobs/{job}").json["result"]["latest_checkpoint"]
    assert latest == {"id": cks[2]["id"], "step": 30, "metrics": {"loss": 1.0 / 3}}


BAD_WORKER = textwrap.dedent("""
    import sys
    import trainyard
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "agent":
        # Skip the SDK's own check, so that the agent is the one that refuses the directory.
        build = trainyard._build_report
        def unchecked(metrics, checkpoint):
            msg = build(metrics, None)
            msg["checkpoint_dir"] = checkpoint
            return msg
        trainyard._build_report = unchecked
    try:
        trainyard.report({"loss": 1.0}, checkpoint=path)
    except trainyard.TrainyardError as e:
        print("REFUSED:", e, flush=True)
        raise
""")


def test_missing_checkpoint_dir_makes_report_raise_and_the_job_fail(server, agent_factory):
    srv = server
    agent = agent_factory(cpus=2)
    work = harness.make_tmpdir("ty-ckpt-bad-")
    a_file = os.path.join(work, "not-a-dir")
    with open(a_file, "w") as f:
        f.write("x")
    cases = [("sdk", "/nonexistent/ty-ckpt", "/nonexistent/ty-ckpt"),
             ("agent", "/nonexistent/ty-ckpt", "checkpoint_dir '/nonexistent/ty-ckpt' is not a "
                                               "directory the worker can read"),
             ("agent", a_file, f"checkpoint_dir '{a_file}' is not a directory the worker can read")]
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(BAD_WORKER)
    for mode, path, expect in cases:
        job = srv.submit({"name": "ckpt-bad", "entrypoint": [PY, "train.py", mode, path],
                          "working_dir": work, "scaling_config": {"num_workers": 1}})["id"]
        done = srv.wait_job(job, {"SUCCEEDED", "FAILED"})
        assert done["status"] == "FAILED", done
        log = agent.worker_log(job, 0)
        assert "REFUSED:" in log and expect in log, (mode, log)
        assert checkpoints(srv, job) == []


def test_checkpoints_of_unknown_job_is_404(server):
    r = server.request("GET", "/api/v1/jobs/999999/checkpoints")
    assert r.status == 404, r
    assert {k.lower(): v for k, v in r.headers.items()}["content-type"].startswith(
        "application/problem+json")


def test_viewer_may_list_checkpoints(server):
    job = server.submit({"name": "ckpt-none", "entrypoint": ["true"]})["id"]
    viewer = server.create_token("ckpt-viewer", "viewer")
    r = server.request("GET", f"/api/v1/jobs/{job}/checkpoints", token=viewer)
    assert r.status == 200 and r.json == {"checkpoints": []}, r
    assert server.request("GET", f"/api/v1/jobs/{job}/checkpoints", token=None).status == 401


# --- the server side alone: a fake node speaks the agent protocol ------------------------------

def test_registration_needs_every_rank_and_a_directory_and_is_idempotent(server_factory, pg):
    from test_metrics import SERVER_ARGS, FakeAgent, db_name, running_job
    srv = server_factory(extra_args=SERVER_ARGS)
    node = FakeAgent(srv)
    try:
        job = running_job(srv, node)
        # Round 1: no directory anywhere -> no checkpoint.
        node.report(job, 0, 1, {"loss": 0.9}, step=1)
        node.report(job, 1, 1, {"loss": 1.9}, step=1)
        # Round 2: only rank 1 passes a directory; rank 0's metrics are attached.
        node.report(job, 0, 2, {"loss": 0.8, "acc": 0.5}, step=2)
        assert checkpoints(srv, job) == []
        r1 = node.report_msg(job, 1, 2, {"loss": 1.8}, step=2, checkpoint_dir="/ck/b")
        r1["checkpoint_bytes"] = 5
        seq = node.send_event(r1)
        node.wait_ack(seq)
        cks = checkpoints(srv, job)
        assert len(cks) == 1
        assert cks[0]["index"] == 2 and cks[0]["step"] == 2
        assert cks[0]["metrics"] == {"loss": 0.8, "acc": 0.5}
        assert cks[0]["location"] == [{"node_id": "node-a", "path": "/ck/b"}]
        assert cks[0]["size_bytes"] == 5
        # The resend of the report that completed the round changes nothing.
        seq = node.send_event(r1)
        node.wait_ack(seq)
        assert checkpoints(srv, job) == cks
        # Round 3: both ranks, sizes summed per directory.
        for rank, path, size in ((1, "/ck/b3", 7), (0, "/ck/a3", 11)):
            m = node.report_msg(job, rank, 3, {"loss": 0.7 + rank}, step=3, checkpoint_dir=path)
            m["checkpoint_bytes"] = size
            node.wait_ack(node.send_event(m))
        cks = checkpoints(srv, job)
        assert [c["index"] for c in cks] == [2, 3]
        assert cks[1]["location"] == [{"node_id": "node-a", "path": "/ck/a3"},
                                      {"node_id": "node-a", "path": "/ck/b3"}]
        assert cks[1]["size_bytes"] == 18 and cks[1]["metrics"] == {"loss": 0.7}
        rows = pg.psql(f"SELECT count(*) FROM checkpoints WHERE job_id = {job}", db=db_name(srv))
        assert int(rows) == 2
        latest = srv.request("GET", f"/api/v1/jobs/{job}").json["result"]["latest_checkpoint"]
        assert latest == {"id": cks[1]["id"], "step": 3, "metrics": {"loss": 0.7}}
    finally:
        node.close()
