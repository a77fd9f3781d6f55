"""High availability: two servers on one PostgreSQL database, one of them the leader (it schedules,
times jobs out and marks nodes LOST; docs/high-availability.md). Real servers, a real agent and
real worker processes; the leader is killed with SIGKILL (a running job and a sweep carry on)."""
import os
import secrets
import signal
import time

import pytest

import harness


@pytest.fixture
def pair(database):
    """Two servers on the test's database with one cluster token and one artifact store; the first
    started leads. Those still running at teardown must exit 0 on SIGTERM."""
    token = "tyc_" + secrets.token_hex(20)
    artifacts = harness.make_tmpdir("ty-ha-art-")
    servers = []
    for _ in range(2):
        s = harness.Server(database_url=database, env={"TRAINYARD_CLUSTER_TOKEN": token},
                           extra_args=["--artifact-dir", artifacts, "--heartbeat-timeout-s", "4"])
        servers.append(s.start())
        wait_role(s, "leader" if len(servers) == 1 else "follower")
    servers[1].admin_token = servers[0].admin_token  # tokens live in the database
    yield servers, token
    for s in servers:
        if s.proc.poll() is None:
            code = s.stop()
            assert code == 0, f"server exited with {code}:\n{s.log_text()}"


def role(server):
    try:
        r = server.request("GET", "/api/v1/health", token=None, timeout=5)
    except OSError:
        return None
    return r.json.get("role") if r.status == 200 else None


def wait_role(server, wanted, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if role(server) == wanted:
            return
        time.sleep(0.05)
    raise AssertionError(f"server is not {wanted} after {timeout}s:\n{server.log_text()}")


def gated_job(gate):
    """One worker that prints a line, waits for the file `gate`, prints another and succeeds."""
    script = f"echo before; while [ ! -e {gate} ]; do sleep 0.1; done; echo after"
    return {"entrypoint": ["/bin/sh", "-c", script], "scaling_config": {"num_workers": 1}}


def attempts_of(server, job):
    r = server.request("GET", f"/api/v1/jobs/{job}/attempts")
    assert r.status == 200, r
    return [(a["attempt"], a["status"]) for a in r.json["attempts"]]


def log_lines(server, job):
    r = server.request("GET", f"/api/v1/jobs/{job}/logs?rank=0")
    assert r.status == 200, r
    return r.text.split("\n")[:-1]


def wait_log_lines(server, job, count, timeout=60):
    """The job's rank-0 lines once there are `count` (output is streamed apart from the exit)."""
    deadline = time.time() + timeout
    while len(got := log_lines(server, job)) < count and time.time() < deadline:
        time.sleep(0.1)
    return got


def test_leader_killed_the_other_leads_and_the_running_job_finishes(pair):
    (leader, follower), token = pair
    agent = harness.Agent(leader, also=[follower])  # connected to the leader, the harder case
    agent.start(token=token)
    try:
        gate = os.path.join(harness.make_tmpdir("ty-ha-gate-"), "go")
        job = follower.submit(gated_job(gate))["id"]  # any server takes a submission
        follower.wait_job(job, {"RUNNING"})
        assert wait_log_lines(follower, job, 1) == ["before"]
        # A sweep (issue 25) of two trials, one at a time: its first trial waits for the gate too,
        # so the second is submitted by whichever server leads after the first trial's report.
        trial = ("import os, time, trainyard\n"
                 f"while not os.path.exists({gate!r}): time.sleep(0.05)\n"
                 "trainyard.report({'acc': trainyard.get_context().config['q']})\n")
        r = follower.request("POST", "/api/v1/sweeps", {
            "name": "ha", "job": {"entrypoint": ["/usr/bin/python3", "-c", trial]},
            "param_space": {"q": {"grid_search": [1, 2]}},
            "tune_config": {"metric": "acc", "mode": "max", "max_concurrent_trials": 1}})
        assert r.status == 201, r
        sweep = r.json["id"]
        harness.wait_for(lambda: [t["status"] for t in follower.request(
            "GET", f"/api/v1/sweeps/{sweep}").json["trials"]][:1] == ["RUNNING"], timeout=60,
            what="the sweep's first trial to run")

        leader.stop(signal.SIGKILL)
        wait_role(follower, "leader")
        # The agent moves to the survivor and re-registers; the worker never stopped.
        agent.server = follower
        agent.wait_node()
        open(gate, "w").close()
        done = follower.wait_job(job, {"SUCCEEDED", "FAILED", "STOPPED"})
        assert done["status"] == "SUCCEEDED", done
        assert attempts_of(follower, job) == [(1, "SUCCEEDED")]
        assert wait_log_lines(follower, job, 2) == ["before", "after"]

        # The new leader schedules what is submitted after the failover.
        later = follower.submit({"entrypoint": ["/bin/sh", "-c", "echo later"],
                                 "scaling_config": {"num_workers": 1}})["id"]
        done = follower.wait_job(later, {"SUCCEEDED", "FAILED", "STOPPED"})
        assert done["status"] == "SUCCEEDED", done
        assert attempts_of(follower, later) == [(1, "SUCCEEDED")]
        assert f"registered with {follower.ws_url}" in agent.log_text()
        # The sweep outlived its leader: the new one submitted its second trial and ended it.
        harness.wait_for(lambda: follower.request("GET", f"/api/v1/sweeps/{sweep}").json[
            "status"] != "RUNNING", timeout=60, what="the sweep to finish")
        s = follower.request("GET", f"/api/v1/sweeps/{sweep}").json
        assert s["status"] == "SUCCEEDED" and len(s["trials"]) == 2, s
        assert s["best_trial"]["index"] == 1 and s["best_trial"]["best_metric"] == 2, s
    finally:
        assert agent.stop() == 0, agent.log_text()


def test_agent_on_a_follower_gets_its_launches_stops_and_forgets(pair):
    (leader, follower), token = pair
    agent = harness.Agent(follower, also=[leader])  # connected to the follower
    agent.start(token=token)
    try:
        gate = os.path.join(harness.make_tmpdir("ty-ha-gate-"), "go")
        # The leader places it; the launch reaches the agent through the follower (a notification).
        job = leader.submit(gated_job(gate))["id"]
        leader.wait_job(job, {"RUNNING"})
        # Heartbeats reach the leader through the database: past twice the timeout (4 s), the
        # node is still ALIVE and the job still running.
        time.sleep(9)
        assert leader.request("GET", f"/api/v1/nodes/{agent.node_id}").json["status"] == "ALIVE"
        assert leader.request("GET", f"/api/v1/jobs/{job}").json["status"] == "RUNNING"
        # A stop asked of the leader reaches the worker through the follower.
        r = leader.request("POST", f"/api/v1/jobs/{job}/stop")
        assert r.status in (200, 202), r
        done = leader.wait_job(job, {"SUCCEEDED", "FAILED", "STOPPED"})
        assert done["status"] == "STOPPED", done
        assert role(leader) == "leader" and role(follower) == "follower"

        # A delete through the leader reaches the agent through the follower (`forget`): its
        # checkpoint staging for the job goes.
        staging = os.path.join(agent.data_dir, "checkpoints", str(job))
        os.makedirs(staging, exist_ok=True)
        r = leader.request("DELETE", f"/api/v1/jobs/{job}")
        assert r.status in (200, 204), r
        deadline = time.time() + 60
        while os.path.exists(staging) and time.time() < deadline:
            time.sleep(0.1)
        assert not os.path.exists(staging), agent.log_text()

        # An agent that dies on the follower is marked LOST by the leader.
        agent.kill()
        agent.server = leader
        agent.wait_node(statuses=("LOST",), timeout=60)
    finally:
        if not agent.stopped_by_test:
            assert agent.stop() == 0, agent.log_text()
