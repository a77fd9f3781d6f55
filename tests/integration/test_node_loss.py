"""A node lost mid-job (issue 23, point 4): when its agent and its workers are killed with
SIGKILL, the surviving rank's allreduce fails ("peer closed the connection") and the job's attempt
is failing; the workers on the node whose agent's connection closed are then counted as lost at
once, and the next attempt runs on the remaining capacity without waiting for the heartbeat
timeout's LOST mark. Real server, two agents and C SDK workers (tests/integration/progs/
collective_loop.c) in allreduces; the heartbeat timeout is long (60 s), so the killed node is
still ALIVE when the next attempt runs."""
import os

import harness

LOOP = os.path.join(harness.BUILD_DIR, "tests", "progs", "ty_collective_loop")


def workers(srv, job):
    return srv.request("GET", f"/api/v1/jobs/{job}/workers").json["workers"]


def test_node_killed_mid_allreduce_restarts_at_once_on_the_remaining_capacity(server_factory,
                                                                             agent_factory):
    srv = server_factory(extra_args=["--heartbeat-timeout-s", "60"])
    a = agent_factory(srv, cpus=1)
    b = agent_factory(srv, cpus=1)
    job = srv.submit({"name": "node-loss", "entrypoint": [LOOP, "1000000", "20"],
                      "backend": "native",
                      "scaling_config": {"num_workers": {"min": 1, "max": 2}},
                      "run_config": {"failure_config": {"max_failures": 1}}})["id"]
    srv.wait_job(job, {"RUNNING"}, timeout=60)
    first = workers(srv, job)
    assert {w["node_id"] for w in first} == {a.node_id, b.node_id}, first
    # Killed once the ranks are connected (past their first allreduce): a rank killed before
    # its peer reached it leaves that peer waiting to connect until the ring's own timeout, not
    # failing mid-allreduce.
    harness.wait_for(lambda: all((w["progress"] or {}).get("coll_seq", 0) >= 2
                                 for w in workers(srv, job)),
                     timeout=60, what="both ranks past their first allreduce")

    b.kill_node([w["pid"] for w in first if w["node_id"] == b.node_id])

    def second_running():
        j = srv.request("GET", f"/api/v1/jobs/{job}").json
        return j if j["status"] == "RUNNING" and j["attempt"] == 2 else None
    harness.wait_for(second_running, timeout=40, what="attempt 2 running")
    # B is not LOST yet (60 s): the restart did not wait for its heartbeat timeout.
    node_b = srv.request("GET", f"/api/v1/nodes/{b.node_id}").json
    assert node_b["status"] == "ALIVE", node_b
    second = [w for w in workers(srv, job) if w["attempt"] == 2]
    assert [w["node_id"] for w in second] == [a.node_id], second
    lost = [w for w in workers(srv, job) if w["attempt"] == 1 and w["node_id"] == b.node_id]
    assert [w["status"] for w in lost] == ["LOST"], lost
    events = [e["message"] or "" for e in
              srv.request("GET", f"/api/v1/jobs/{job}/events").json["events"]]
    assert any(m.startswith(f"node {b.node_id}: its agent is disconnected") for m in events), \
        events
    attempt1 = srv.request("GET", f"/api/v1/jobs/{job}/attempts").json["attempts"][0]
    assert attempt1["end_reason"]["event"] == "worker_failed", attempt1
    assert attempt1["end_reason"]["node_id"] == a.node_id, attempt1

    assert srv.request("POST", f"/api/v1/jobs/{job}/stop").status == 202
    done = srv.wait_job(job, {"STOPPED", "FAILED", "SUCCEEDED"}, timeout=60)
    assert done["status"] == "STOPPED", done
