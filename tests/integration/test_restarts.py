"""Restarts (issue 12, docs/lifecycle.md "Restarts", docs/fault-tolerance.md): with
run_config.failure_config.max_failures, a failed worker restarts its job (RESTARTING, a new
attempt) from the latest committed checkpoint instead of failing it; the attempts say why each
one ended and which checkpoint each one started from. Real server, agent and worker processes."""
import json
import os
import signal
import textwrap
import time

import pytest

import harness
from test_checkpoints import PY
from test_resume import rank0_series

# Rank 1 of the first attempt fails with code 3; every other worker succeeds. Each worker writes
# what it was started with to seen-<attempt>-<rank>.json.
FAILS_ONCE = textwrap.dedent("""
    import json, os, sys
    import trainyard
    ctx = trainyard.get_context()
    attempt, rank = int(os.environ["TRAINYARD_ATTEMPT"]), ctx.get_world_rank()
    with open(f"seen-{attempt}-{rank}.json", "w") as f:
        json.dump({"checkpoint": os.environ.get("TRAINYARD_CHECKPOINT_DIR", "")}, f)
    if rank == 1 and (attempt == 1 or os.environ.get("ALWAYS_FAIL")):
        sys.exit(3)
""")


def submit_script(srv, script, workers=2, max_failures=1, env=None):
    work = harness.make_tmpdir("ty-restart-")
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(script)
    spec = {"name": "restart", "entrypoint": [PY, "train.py"], "working_dir": work,
            "env": env or {}, "scaling_config": {"num_workers": workers},
            "run_config": {"failure_config": {"max_failures": max_failures}}}
    return srv.submit(spec)["id"], work


def attempts(srv, job):
    r = srv.request("GET", f"/api/v1/jobs/{job}/attempts")
    assert r.status == 200, r
    return r.json["attempts"]


def messages(srv, job):
    return [e["message"] or "" for e in
            srv.request("GET", f"/api/v1/jobs/{job}/events").json["events"]]


@pytest.fixture(scope="module")
def server(module_server_factory):
    """One server for the file's tests (conftest.py): each makes its own jobs."""
    return module_server_factory()


def test_a_failed_worker_restarts_the_job_once(server, agent_factory):
    agent = agent_factory(cpus=2)
    job, work = submit_script(server, FAILS_ONCE)
    done = server.wait_job(job, {"SUCCEEDED", "FAILED"})
    assert done["status"] == "SUCCEEDED", (done, attempts(server, job), messages(server, job))
    assert done["attempt"] == 2 and done["failures"] == 1 and done["result"]["error"] is None
    first, second = attempts(server, job)
    assert first["status"] == "FAILED" and first["error"] == "worker rank 1 exited with code 3"
    assert first["end_reason"] == {
        "event": "worker_failed", "error": "worker rank 1 exited with code 3", "attempt": 1,
        "rank": 1, "exit_code": 3, "signal": None, "node_id": agent.node_id, "restarted": True}
    assert first["finished_at"] is not None and first["resumed_from_checkpoint"] is None
    assert second["status"] == "SUCCEEDED" and second["end_reason"] is None
    assert second["resumed_from_checkpoint"] is None  # nothing was checkpointed
    msgs = messages(server, job)
    assert (f"restarting after failure 1 of 1: worker rank 1 exited with code 3 on node "
            f"{agent.node_id}") in msgs, msgs
    assert any(m.startswith("attempt 1 ended (worker rank 1 exited with code 3)") for m in msgs)
    assert "starting 2 workers on 1 node (attempt 2, from scratch: no usable checkpoint)" in msgs
    # Rank 1 ran in both attempts (rank 0 of the first may have been stopped before writing).
    assert os.path.exists(os.path.join(work, "seen-1-1.json"))
    for rank in (0, 1):
        assert os.path.exists(os.path.join(work, f"seen-2-{rank}.json"))


def test_failures_beyond_max_failures_fail_the_job(server, agent_factory):
    agent_factory(cpus=2)
    job, _ = submit_script(server, FAILS_ONCE, env={"ALWAYS_FAIL": "1"})
    done = server.wait_job(job, {"SUCCEEDED", "FAILED"})
    assert done["status"] == "FAILED", done
    assert done["attempt"] == 2 and done["failures"] == 1
    assert done["result"]["error"] == "worker rank 1 exited with code 3"
    first, second = attempts(server, job)
    assert first["end_reason"]["restarted"] is True
    assert second["status"] == "FAILED" and second["end_reason"]["restarted"] is False
    assert second["end_reason"]["rank"] == 1 and second["end_reason"]["exit_code"] == 3


def test_without_max_failures_a_failure_still_fails_the_job(server, agent_factory):
    agent_factory(cpus=2)
    job, _ = submit_script(server, FAILS_ONCE, max_failures=0)
    done = server.wait_job(job, {"SUCCEEDED", "FAILED"})
    assert done["status"] == "FAILED" and done["attempt"] == 1 and done["failures"] == 0, done
    assert [a["status"] for a in attempts(server, job)] == ["FAILED"]


def test_a_user_stop_never_counts_as_a_failure(server, agent_factory):
    agent_factory(cpus=2)
    job, _ = submit_script(server, "import time\ntime.sleep(600)\n", max_failures=3)
    server.wait_job(job, {"RUNNING"})
    assert server.request("POST", f"/api/v1/jobs/{job}/stop").status == 202
    done = server.wait_job(job, {"STOPPED", "FAILED", "SUCCEEDED"})
    assert done["status"] == "STOPPED" and done["failures"] == 0 and done["attempt"] == 1, done
    [only] = attempts(server, job)
    assert only["status"] == "STOPPED" and only["end_reason"] is None


def fashion_mnist_spec():
    with open(os.path.join(harness.SOURCE_DIR, "examples/fashion_mnist/job.json")) as f:
        spec = json.load(f)
    spec["entrypoint"] = [os.path.join(harness.BUILD_DIR, "examples/fashion_mnist/fashion_mnist")]
    spec["working_dir"] = os.path.abspath(harness.SOURCE_DIR)
    # The accuracy bar of test_examples.py (0.85 after 2 epochs of the full set); 3 epochs leave
    # the kill room to land mid-training after the first checkpoint. Every checkpoint is kept.
    spec["train_loop_config"].update({"epochs": 3, "min_accuracy": 0.85, "checkpoint_every": 1})
    spec["run_config"]["checkpoint_config"] = {}
    spec["run_config"]["failure_config"] = {"max_failures": 1}
    return spec


def test_fashion_mnist_killed_worker_restarts_from_its_latest_checkpoint(server, agent_factory):
    agent = agent_factory(cpus=2)
    job = server.submit(fashion_mnist_spec())["id"]
    deadline = time.time() + 300
    while not server.request("GET", f"/api/v1/jobs/{job}/checkpoints").json["checkpoints"]:
        assert time.time() < deadline, server.request("GET", f"/api/v1/jobs/{job}").json
        time.sleep(0.1)
    workers = server.request("GET", f"/api/v1/jobs/{job}/workers").json["workers"]
    [victim] = [w for w in workers if w["rank"] == 1 and w["attempt"] == 1]
    assert victim["status"] == "RUNNING", workers
    os.kill(victim["pid"], signal.SIGKILL)

    done = server.wait_job(job, {"SUCCEEDED", "FAILED"}, timeout=600)
    assert done["status"] == "SUCCEEDED", (done, attempts(server, job), messages(server, job),
                                           agent.worker_log(job, 0, attempt=2))
    assert done["attempt"] == 2 and done["failures"] == 1
    first, second = attempts(server, job)
    assert first["end_reason"]["rank"] == 1 and first["end_reason"]["signal"] == 9, first
    assert first["end_reason"]["node_id"] == agent.node_id and first["status"] == "FAILED"
    # The second attempt started from the last checkpoint the first one committed.
    cks = server.request("GET", f"/api/v1/jobs/{job}/checkpoints").json["checkpoints"]
    latest = max((c for c in cks if c["attempt"] == 1), key=lambda c: c["index"])
    assert second["resumed_from_checkpoint"] == latest["id"], (second, cks)
    resumed_epoch = latest["metrics"]["epoch"]
    log = agent.worker_log(job, 0, attempt=2)
    assert f"after epoch {resumed_epoch} " in log, log
    m = server.request("GET", f"/api/v1/jobs/{job}/metrics?name=epoch&rank=0").json["metrics"]
    second_epochs = [p["value"] for p in m if p["attempt"] == 2]
    assert second_epochs == list(range(resumed_epoch + 1, 4)), m
    assert f"starting 2 workers on 1 node (attempt 2, resuming from checkpoint {latest['id']})" \
        in messages(server, job)
    assert done["result"]["metrics"]["accuracy"] >= 0.85
    assert rank0_series(server, job, "accuracy")


# Reports a first checkpoint (step 1), then waits for the agent's checkpoint request, saves a last
# one (step 2, "final") and exits 0. An attempt that starts from a checkpoint records what it got
# and exits 0 at once. Each worker writes seen-<attempt>-<rank>.json.
PREEMPTIBLE = textwrap.dedent("""
    import json, os, shutil, tempfile, time
    import trainyard
    ctx = trainyard.get_context()
    attempt, rank = ctx.get_attempt(), ctx.get_world_rank()
    seen = {"asked_at_start": trainyard.should_checkpoint(), "checkpoint": None}
    ck = trainyard.get_checkpoint()
    if ck:
        with open(os.path.join(ck, f"state-{rank}.json")) as f:
            seen["checkpoint"] = json.load(f)
    else:
        def save(step, final):
            d = tempfile.mkdtemp()
            with open(os.path.join(d, f"state-{rank}.json"), "w") as f:
                json.dump({"step": step, "final": final}, f)
            trainyard.report({"step": step}, checkpoint=d)
            shutil.rmtree(d)
        save(1, False)
        while not trainyard.should_checkpoint():
            time.sleep(0.05)
        save(2, True)
    with open(f"seen-{attempt}-{rank}.json", "w") as f:
        json.dump(seen, f)
""")


def wait_for(what, predicate, timeout=60):
    deadline = time.time() + timeout
    while not (value := predicate()):
        assert time.time() < deadline, what
        time.sleep(0.05)
    return value


def test_drain_preempts_and_restarts_elsewhere_from_the_last_checkpoint(server, agent_factory):
    a = agent_factory(cpus=2)
    work = harness.make_tmpdir("ty-restart-")
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(PREEMPTIBLE)
    job = server.submit({
        "name": "preempt", "entrypoint": [PY, "train.py"], "working_dir": work,
        "scaling_config": {"num_workers": 2},
        "run_config": {"failure_config": {"preemption_grace_s": 60}}})["id"]
    wait_for("first checkpoint", lambda: server.request(
        "GET", f"/api/v1/jobs/{job}/checkpoints").json["checkpoints"])
    b = agent_factory(cpus=2)
    # Only an admin may drain: a user's attempt changes nothing.
    user = server.create_token("alice", "user")
    assert server.request("POST", f"/api/v1/nodes/{a.node_id}/drain", token=user).status == 403
    assert server.request("GET", f"/api/v1/jobs/{job}").json["status"] == "RUNNING"

    r = server.request("POST", f"/api/v1/nodes/{a.node_id}/drain")
    assert r.status == 200 and r.json["draining"] is True, r
    done = server.wait_job(job, {"SUCCEEDED", "FAILED", "STOPPED"})
    assert done["status"] == "SUCCEEDED", (done, attempts(server, job), messages(server, job))
    assert done["attempt"] == 2 and done["failures"] == 0 and done["preemptions"] == 1, done
    first, second = attempts(server, job)
    assert first["status"] == "STOPPED" and first["error"] is None, first
    assert first["end_reason"] == {"event": "preempted", "node_id": a.node_id, "restarted": True,
                                   "error": f"preempted: node {a.node_id} is draining"}
    # The restart used the checkpoint the program saved when asked, on the other node.
    cks = server.request("GET", f"/api/v1/jobs/{job}/checkpoints").json["checkpoints"]
    last = max((c for c in cks if c["attempt"] == 1), key=lambda c: c["index"])
    assert last["index"] == 2 and last["step"] == 2, cks
    assert second["resumed_from_checkpoint"] == last["id"], (second, cks)
    workers = server.request("GET", f"/api/v1/jobs/{job}/workers").json["workers"]
    assert {w["node_id"] for w in workers if w["attempt"] == 2} == {b.node_id}, workers
    for rank in (0, 1):
        with open(os.path.join(work, f"seen-1-{rank}.json")) as f:
            assert json.load(f) == {"asked_at_start": False, "checkpoint": None}
        with open(os.path.join(work, f"seen-2-{rank}.json")) as f:
            assert json.load(f) == {"asked_at_start": False,
                                    "checkpoint": {"step": 2, "final": True}}
    assert "asked to checkpoint; SIGTERM in 60s" in a.log_text(), a.log_text()
    msgs = messages(server, job)
    assert any(m.startswith(f"preempted: node {a.node_id} is draining; restarting elsewhere "
                            "(preemption 1 of at most 10, not a failure)") for m in msgs), msgs


def test_a_user_stop_asks_for_a_checkpoint_first(server, agent_factory):
    agent_factory(cpus=2)
    work = harness.make_tmpdir("ty-restart-")
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(PREEMPTIBLE)
    job = server.submit({
        "name": "stop-notice", "entrypoint": [PY, "train.py"], "working_dir": work,
        "scaling_config": {"num_workers": 2},
        "run_config": {"failure_config": {"preemption_grace_s": 60, "max_failures": 2}}})["id"]
    wait_for("first checkpoint", lambda: server.request(
        "GET", f"/api/v1/jobs/{job}/checkpoints").json["checkpoints"])
    assert server.request("POST", f"/api/v1/jobs/{job}/stop").status == 202
    done = server.wait_job(job, {"STOPPED", "FAILED", "SUCCEEDED"})
    assert done["status"] == "STOPPED" and done["attempt"] == 1, done
    assert done["failures"] == 0 and done["preemptions"] == 0, done
    cks = wait_for("last checkpoint", lambda: [c for c in server.request(
        "GET", f"/api/v1/jobs/{job}/checkpoints").json["checkpoints"] if c["index"] == 2])
    assert cks[0]["step"] == 2
    for rank in (0, 1):
        with open(os.path.join(work, f"seen-1-{rank}.json")) as f:
            assert json.load(f) == {"asked_at_start": False, "checkpoint": None}


# Records its world size; runs until asked to checkpoint (a stop), or until its agent is gone
# (its parent changes: no orphan outlives the test).
ELASTIC = textwrap.dedent("""
    import json, os, sys, time
    import trainyard
    ctx = trainyard.get_context()
    parent, deadline = os.getppid(), time.time() + 300
    with open(f"seen-{ctx.get_attempt()}-{ctx.get_world_rank()}.json", "w") as f:
        json.dump({"world": ctx.get_world_size()}, f)
    while not trainyard.should_checkpoint():
        if os.getppid() != parent or time.time() > deadline:
            sys.exit(1)
        time.sleep(0.05)
""")


def wait_attempt_running(srv, job, attempt, timeout=90):
    def running():
        j = srv.request("GET", f"/api/v1/jobs/{job}").json
        assert j["status"] not in ("FAILED", "STOPPED", "SUCCEEDED"), j
        return j["status"] == "RUNNING" and j["attempt"] == attempt
    wait_for(f"attempt {attempt} running: {attempts(srv, job)} {messages(srv, job)}", running,
             timeout)
    return attempts(srv, job)[attempt - 1]


def test_elastic_job_shrinks_after_a_node_loss_and_grows_back(server_factory, agent_factory):
    srv = server_factory(extra_args=["--heartbeat-timeout-s", "2"])
    a = agent_factory(srv, cpus=2)
    b = agent_factory(srv, cpus=2)
    work = harness.make_tmpdir("ty-restart-")
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(ELASTIC)
    job = srv.submit({
        "name": "elastic", "entrypoint": [PY, "train.py"], "working_dir": work,
        "scaling_config": {"num_workers": {"min": 2, "max": 4}, "elastic_resize_interval_s": 1},
        "run_config": {"failure_config": {"max_failures": 1, "preemption_grace_s": 30}}})["id"]
    first = wait_attempt_running(srv, job, 1)
    assert first["world_size"] == 4, first

    b.kill()  # its node is lost after the heartbeat timeout: the job goes on at 2 workers on A
    second = wait_attempt_running(srv, job, 2)
    assert second["world_size"] == 2, second
    workers = srv.request("GET", f"/api/v1/jobs/{job}/workers").json["workers"]
    assert {w["node_id"] for w in workers if w["attempt"] == 2} == {a.node_id}, workers
    first = attempts(srv, job)[0]
    assert first["status"] == "FAILED" and first["end_reason"]["event"] == "node_lost", first
    assert first["end_reason"]["node_id"] == b.node_id

    b.start()  # back: room for 2 more workers, so the job restarts at 4
    third = wait_attempt_running(srv, job, 3)
    assert third["world_size"] == 4, third
    second = attempts(srv, job)[1]
    assert second["status"] == "STOPPED" and second["end_reason"]["event"] == "resize", second
    assert second["end_reason"]["error"].startswith("room for 2 more workers has been free for")
    for attempt, world in ((1, 4), (2, 2), (3, 4)):  # RUNNING: exec'd, maybe not written yet
        path = os.path.join(work, f"seen-{attempt}-0.json")
        wait_for(path, lambda: os.path.exists(path) and os.path.getsize(path) > 0)
        with open(path) as f:
            assert json.load(f) == {"world": world}

    assert srv.request("POST", f"/api/v1/jobs/{job}/stop").status == 202
    done = srv.wait_job(job, {"STOPPED", "FAILED", "SUCCEEDED"})
    assert done["status"] == "STOPPED" and done["failures"] == 1, done
    assert done["preemptions"] == 0 and done["attempt"] == 3, done
