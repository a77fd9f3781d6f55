"""Hangs (issue 12): every rank's SDK sends its agent a heartbeat with the collective it is in;
the agent relays it to the server, which names a hang in the job's events once no rank
progressed for failure_config.hang_warn_s, and fails the job past hang_timeout_s. The stuck rank
is a real worker (tests/integration/progs/collective_loop.c) that libtrainyard makes sleep inside
one collective (TY_TEST_STALL, for tests only)."""
import os
import re
import socket
import textwrap
import time

import harness
from test_security import SERVER_ARGS, cluster_token, frame, read_frame, register_msg
from wsclient import WebSocket

LOOP = os.path.join(harness.BUILD_DIR, "tests", "progs", "ty_collective_loop")
PY = "/usr/bin/python3"


def submit_loop(srv, workers, stall, iterations=12, sleep_ms=0, **failure):
    return srv.submit({"name": "hang", "entrypoint": [LOOP, str(iterations), str(sleep_ms)],
                       "backend": "native",
                       "env": {"TY_TEST_STALL": stall} if stall else {},
                       "scaling_config": {"num_workers": workers},
                       "run_config": {"failure_config": failure}})["id"]


def hang_events(srv, job):
    """The events naming a hang (not the status changes a failure through a hang makes)."""
    events = srv.request("GET", f"/api/v1/jobs/{job}/events").json["events"]
    return [e for e in events
            if e["status"] == "RUNNING" and (e["message"] or "").startswith("hang: ")]


def workers(srv, job):
    return srv.request("GET", f"/api/v1/jobs/{job}/workers").json["workers"]


def wait_until(what, fn, timeout=90):
    """Polls fn until it returns something true; returns it."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout} s")


def test_a_rank_asleep_in_a_collective_is_named_once_in_the_events(server, agent_factory):
    agent = agent_factory(cpus=4)
    job = submit_loop(server, 4, "1:5:15", hang_warn_s=3)
    [event] = wait_until("a hang event", lambda: hang_events(server, job))
    assert re.fullmatch(r"hang: no progress for \d+ s: rank 1 in allreduce #5; "
                        r"ranks 0, 2-3 waiting in allreduce #6", event["message"]), event
    assert event["status"] == "RUNNING"
    # Where each rank is, as the API shows it (the rank still sleeps: 15 s against 3 s).
    progress = {w["rank"]: w["progress"] for w in workers(server, job)}
    assert progress[1]["op"] == "allreduce" and progress[1]["coll_seq"] == 5, progress
    assert progress[1]["in_collective"] is True
    for r in (0, 2, 3):
        assert progress[r]["coll_seq"] == 6 and progress[r]["in_collective"] is True, progress
    # The rank wakes up and the job finishes; the hang was named once.
    done = server.wait_job(job, {"SUCCEEDED", "FAILED"})
    assert done["status"] == "SUCCEEDED", (done, agent.worker_log(job, 1))
    assert len(hang_events(server, job)) == 1


def test_a_hang_past_hang_timeout_fails_the_job_naming_it(server, agent_factory):
    agent = agent_factory(cpus=2)
    job = submit_loop(server, 2, "0:3:600", hang_warn_s=3, hang_timeout_s=5)
    done = server.wait_job(job, {"SUCCEEDED", "FAILED"})
    assert done["status"] == "FAILED", (done, agent.worker_log(job, 0))
    assert re.fullmatch(r"hang: no progress for \d+ s: rank 0 in allreduce #3; "
                        r"rank 1 waiting in allreduce #4", done["result"]["error"]), done
    [named] = hang_events(server, job)
    assert re.fullmatch(r"hang: no progress for \d+ s: rank 0 in allreduce #3; "
                        r"rank 1 waiting in allreduce #4", named["message"]), named


def test_ranks_computing_between_collectives_are_not_a_hang(server, agent_factory):
    agent_factory(cpus=2)
    # Each rank computes 6 s between collectives: longer than hang_warn_s, but no rank waits.
    job = submit_loop(server, 2, None, iterations=2, sleep_ms=6000, hang_warn_s=3)
    done = server.wait_job(job, {"SUCCEEDED", "FAILED"})
    assert done["status"] == "SUCCEEDED", done
    assert hang_events(server, job) == []


def test_python_workers_send_heartbeats_counting_reports(server, agent_factory):
    agent = agent_factory(cpus=1)
    work = harness.make_tmpdir("ty-hang-py-")
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(textwrap.dedent("""
            import time, trainyard
            trainyard.report({"loss": 1.0})
            trainyard.report({"loss": 0.5})
            time.sleep(600)
        """))
    job = server.submit({"name": "py-heartbeat", "entrypoint": [PY, "train.py"],
                         "working_dir": work})["id"]
    [w] = wait_until("a heartbeat with two reports",
                     lambda: [w for w in workers(server, job)
                              if w["progress"] and w["progress"]["report_seq"] == 2])
    assert w["progress"]["op"] is None and w["progress"]["coll_seq"] == 0, w
    assert w["progress"]["heartbeat_at"], w
    server.request("POST", f"/api/v1/jobs/{job}/stop")
    done = server.wait_job(job, {"STOPPED", "FAILED"})
    assert done["status"] == "STOPPED", (done, agent.worker_log(job, 0))


def test_progress_from_another_node_is_ignored(server_factory, agent_factory):
    server = server_factory(extra_args=SERVER_ARGS)
    agent_factory(srv=server, cpus=1)
    job = server.submit({"name": "long", "entrypoint": "sleep 600"})["id"]
    server.wait_job(job, {"RUNNING"})
    with WebSocket(server.ws_url + "/agent") as ws:
        ws.send_json(register_msg("rogue-node", cluster_token(server)))
        reply = ws.wait_for(lambda m: m["type"] in ("registered", "error"))
        assert reply["type"] == "registered", reply
        ws.send_json({"type": "progress", "workers": [
            {"job_id": str(job), "attempt": 1, "rank": 0, "op": "allreduce", "coll_seq": 7,
             "in_collective": True, "report_seq": 0, "heartbeat_age_ms": 0,
             "progress_age_ms": 0}]})
        # Messages are handled in order: once this event is acked the progress was handled.
        ws.send_json({"type": "worker_exited", "seq": 1, "job_id": str(job), "attempt": 1,
                      "rank": 0, "exit_code": 0, "signal": None, "error": None})
        ws.wait_for(lambda m: m["type"] == "ack" and m["seq"] == 1)
    [w] = workers(server, job)
    assert w["progress"] is None, w
    server.request("POST", f"/api/v1/jobs/{job}/stop")
    server.wait_job(job, {"STOPPED"})


def test_a_foreign_client_cannot_send_heartbeats_for_a_worker(server, agent_factory):
    agent = agent_factory(cpus=1)
    work = harness.make_tmpdir("ty-hang-foreign-")
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write("import time, trainyard\ntrainyard.report({'loss': 1.0})\ntime.sleep(600)\n")
    job = server.submit({"name": "py-heartbeat", "entrypoint": [PY, "train.py"],
                         "working_dir": work})["id"]
    wait_until("the real heartbeat", lambda: [w for w in workers(server, job)
                                              if w["progress"] and w["progress"]["report_seq"]])
    rogue = {"type": "progress", "op": "allreduce", "coll_seq": 999, "in_collective": True,
             "report_seq": 999}
    for hello in (None, {"type": "hello", "job_id": str(job), "attempt": 1, "rank": 0,
                         "pid": os.getpid(), "secret": "guessed"}):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(10)
            s.connect(os.path.join(agent.data_dir, "report.sock"))
            try:
                if hello:
                    s.sendall(frame(hello))
                s.sendall(frame(rogue))
            except BrokenPipeError:
                pass  # refused and closed already
            reply = read_frame(s)
            assert reply is not None and reply["type"] == "error", reply
            assert ("refused" if hello else "hello first") in reply["message"], reply
    # The agent relays a worker's heartbeat every second: two more relays carry the real one.
    time.sleep(2.5)
    [w] = workers(server, job)
    assert w["progress"]["coll_seq"] == 0 and w["progress"]["report_seq"] == 1, w
    server.request("POST", f"/api/v1/jobs/{job}/stop")
    server.wait_job(job, {"STOPPED"})
