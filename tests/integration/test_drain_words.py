"""Drain does what it says (issue 23, point 6): `trainyard drain` says that running jobs are
checkpointed and moved, and names them; `drain --no-preempt` lets them finish on the node;
`trainyard undrain` takes the node back (admins only); `trainyard nodes` shows draining."""
import os

import harness


def problem(r, status):
    assert r.status == status, r
    assert r.headers.get("Content-Type", "").startswith("application/problem+json"), r.headers
    return r.json


def test_drain_no_preempt_lets_jobs_finish_and_undrain_takes_the_node_back(server,
                                                                           agent_factory):
    a = agent_factory(cpus=2)
    node = a.node_id
    work = harness.make_tmpdir("ty-drain-")
    go = os.path.join(work, "go")
    waiting = server.submit({"entrypoint": f"while [ ! -e {go} ]; do sleep 0.05; done",
                             "run_config": {"failure_config": {"max_failures": 0}}})["id"]
    server.wait_job(waiting, {"RUNNING"}, timeout=60)

    # Bad bodies are refused, naming the field; nothing is drained.
    for body, words in (({"preempt": "no"}, '"preempt" must be true'),
                        ({"preemt": False}, "unknown field 'preemt'")):
        assert words in problem(server.request("POST", f"/api/v1/nodes/{node}/drain", body),
                                400)["detail"]
    # Only admins drain and undrain.
    user = server.create_token("bob", "user")
    problem(server.request("POST", f"/api/v1/nodes/{node}/undrain", token=user), 403)
    r = harness.run_cli(server, "undrain", node, token=user)
    assert r.returncode != 0 and r.stderr.strip(), r
    assert server.request("GET", f"/api/v1/nodes/{node}").json["draining"] is False

    r = harness.run_cli(server, "drain", "--no-preempt", node)
    assert r.returncode == 0, r
    assert r.stdout == (f"node {node} draining: no new workers are placed there; running jobs "
                        "finish there ('trainyard undrain' to take it back)\n"), r.stdout
    job = server.request("GET", f"/api/v1/jobs/{waiting}").json
    assert job["status"] == "RUNNING" and job["preemptions"] == 0, job
    r = harness.run_cli(server, "nodes")
    assert r.returncode == 0 and "ALIVE (draining)" in r.stdout, r.stdout
    open(go, "w").close()
    done = server.wait_job(waiting, {"SUCCEEDED", "FAILED", "STOPPED"}, timeout=60)
    assert done["status"] == "SUCCEEDED" and done["attempt"] == 1, done

    r = harness.run_cli(server, "undrain", node)
    assert r.returncode == 0, r
    assert r.stdout == f"node {node} undrained: new workers may be placed there again\n"
    assert server.request("GET", f"/api/v1/nodes/{node}").json["draining"] is False
    assert "(draining)" not in harness.run_cli(server, "nodes").stdout

    # A plain drain moves what runs there, and says so by job id.
    moved = server.submit({"entrypoint": "sleep 1000"})["id"]
    server.wait_job(moved, {"RUNNING"}, timeout=60)
    r = harness.run_cli(server, "drain", node)
    assert r.returncode == 0, r
    assert r.stdout == (f"node {node} draining: no new workers are placed there; job {moved} "
                        "was running there: asked to checkpoint, stopped, and restarted "
                        "elsewhere from the checkpoint\n"), r.stdout
    harness.wait_for(lambda: server.request("GET", f"/api/v1/jobs/{moved}").json["preemptions"]
                     == 1, what="the job preempted")
    assert server.request("POST", f"/api/v1/jobs/{moved}/stop").status in (200, 202)
    r = harness.run_cli(server, "drain", "--help")
    assert "--no-preempt" in r.stdout and "restarted elsewhere" in r.stdout, r.stdout
