"""The agent's checkpoint uploads when things go wrong (issue 11, docs/artifacts.md): an agent
SIGKILLed mid-upload uploads the part when it starts again (its durable queue, from the server's
offset); a chunk corrupted on the way, a file missing from the agent's copy and a server that
cannot write (a full --artifact-dir) each leave a job event naming the checkpoint, the node's
ranks and the reason, and never a complete checkpoint with holes. Real server, agent, workers;
an HTTP proxy between agent and server holds or corrupts requests on the test's signal."""
import os
import subprocess
import tarfile
import textwrap
import threading
import time
import urllib.request

import pytest

import harness
from test_artifacts import (BIG_WORKER, agent_queue_empties, node_credential, part_url, untar,
                            wait_artifacts)
from test_checkpoints import PY, WORKER, submit, wait_checkpoints


class GateProxy(harness.HttpProxy):
    """Forwards HTTP to the server. hold_put N: the N-th PUT is held (not forwarded) until
    release(), then dropped unsent; hold_get: the first GET of a part waits for release() before it
    is forwarded; corrupt_put N: the N-th PUT's body has one byte flipped (its checksum header
    kept)."""

    def __init__(self, target, hold_put=0, hold_get=False, corrupt_put=0):
        self.hold_put, self.hold_get, self.corrupt_put = hold_put, hold_get, corrupt_put
        self.reached = threading.Event()
        self.released = threading.Event()
        super().__init__(target)

    def before(self, method, number, body):
        if method == "PUT" and number == self.hold_put:
            self.reached.set()
            self.released.wait(120)
            return self.DROP
        if method == "GET" and self.hold_get and number == 1:
            self.reached.set()
            self.released.wait(120)
        if method == "PUT" and number == self.corrupt_put:
            body = bytes([body[0] ^ 0xFF]) + body[1:]
        return body

    def close(self):
        self.released.set()
        super().close()


def events(srv, job):
    return [e["message"] or "" for e in
            srv.request("GET", f"/api/v1/jobs/{job}/events").json["events"]]


def wait_event(srv, job, text, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = [m for m in events(srv, job) if text in m]
        if found:
            return found
        time.sleep(0.1)
    return []


def stored_files(srv, ck):
    """The files of checkpoint ck's stored part, as the artifact store holds it."""
    [part] = srv.request("GET", f"/api/v1/checkpoints/{ck['id']}").json["artifact"]["parts"]
    sha = part["sha256"]
    with tarfile.open(os.path.join(srv.data_dir, "artifacts", "sha256", sha[:2], sha)) as tar:
        return {os.path.normpath(m.name): tar.extractfile(m).read()
                for m in tar.getmembers() if m.isfile()}


def disk_files(directory):
    out = {}
    for d, _, fs in os.walk(directory):
        for f in fs:
            with open(os.path.join(d, f), "rb") as fh:
                out[os.path.relpath(os.path.join(d, f), directory)] = fh.read()
    return out


def test_agent_killed_mid_upload_uploads_the_part_when_it_starts_again(server, agent_factory):
    srv = server
    proxy = GateProxy(srv.url, hold_put=2)
    try:
        agent = agent_factory(cpus=2, env={"TRAINYARD_API_URL": proxy.url})
        job = submit(srv, BIG_WORKER, "upload-killed")
        assert srv.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
        assert proxy.reached.wait(120), agent.log_text()
        # The first 16 MiB chunk is on the server, the second held: kill the agent there.
        [ck] = wait_checkpoints(srv, job, 1)
        r = srv.request("GET", f"/api/v1/checkpoints/{ck['id']}")
        assert r.json["artifact"]["state"] == "uploading", r.json
        assert [p["received_bytes"] for p in r.json["artifact"]["parts"]] == [16 << 20], r.json
        agent.kill()
        proxy.released.set()  # the held chunk is dropped, never forwarded
        agent.start()
        [ck] = wait_artifacts(srv, job, 1, timeout=120)
        assert ck["artifact"]["state"] == "complete", (ck, agent.log_text())
    finally:
        proxy.close()
    assert "left by the previous agent" in agent.log_text()
    merged = ck["location"][0]["path"]
    files = stored_files(srv, ck)
    assert sorted(files) == ["weights-0.bin", "weights-1.bin"]
    assert files == disk_files(merged)
    assert agent_queue_empties(agent) == []


def test_a_chunk_corrupted_on_the_way_is_an_event_and_the_upload_completes(server,
                                                                           agent_factory):
    srv = server
    proxy = GateProxy(srv.url, corrupt_put=2)
    try:
        agent = agent_factory(cpus=2, env={"TRAINYARD_API_URL": proxy.url})
        job = submit(srv, BIG_WORKER, "upload-corrupt")
        assert srv.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
        [ck] = wait_artifacts(srv, job, 1, timeout=120)
        assert ck["artifact"]["state"] == "complete", (ck, agent.log_text())
        assert proxy.puts >= 4  # 3 chunks and the resend of the corrupted one
    finally:
        proxy.close()
    [msg] = wait_event(srv, job, "failed its checksum")
    # The id is there once the checkpoint was registered (its report may arrive after the chunk).
    assert msg.startswith("checkpoint 1 ") and f"of attempt 1, part of node {agent.node_id} " \
        f"(rank 0, 1): the chunk at offset {16 << 20} failed its checksum" in msg, msg
    assert stored_files(srv, ck) == disk_files(ck["location"][0]["path"])


def test_a_file_missing_from_the_agents_copy_is_an_event_and_no_complete_checkpoint(
        server, agent_factory):
    srv = server
    proxy = GateProxy(srv.url, hold_get=True)
    try:
        agent = agent_factory(cpus=2, env={"TRAINYARD_API_URL": proxy.url})
        job = submit(srv, BIG_WORKER, "upload-missing")
        assert srv.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
        assert proxy.reached.wait(120), agent.log_text()
        [ck] = wait_checkpoints(srv, job, 1)
        os.remove(os.path.join(ck["location"][0]["path"], "weights-1.bin"))
        proxy.released.set()
        found = wait_event(srv, job, "the agent cannot upload it")
    finally:
        proxy.close()
    assert len(found) == 1, events(srv, job)
    assert found[0] == (f"checkpoint 1 (id {ck['id']}) of attempt 1, part of node "
                        f"{agent.node_id} (rank 0, 1): the agent cannot upload it (file "
                        "weights-1.bin No such file or directory): the checkpoint stays "
                        "incomplete"), found
    r = srv.request("GET", f"/api/v1/checkpoints/{ck['id']}")
    assert r.json["artifact"]["state"] == "uploading", r.json
    assert srv.request("GET", f"/api/v1/checkpoints/{ck['id']}/archive").status == 409
    deadline = time.time() + 30
    while "given up" not in agent.log_text() and time.time() < deadline:
        time.sleep(0.1)
    assert os.listdir(os.path.join(agent.data_dir, "uploads")) == []


def test_part_failed_is_for_the_nodes_of_the_attempt_with_their_credential(server,
                                                                          agent_factory):
    srv = server
    agent = agent_factory(cpus=2, env={"TRAINYARD_API_URL": "none"})
    job = submit(srv, WORKER, "upload-failed-auth")
    assert srv.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    wait_checkpoints(srv, job, 3)
    other = agent_factory(cpus=1, env={"TRAINYARD_API_URL": "none"})  # ran none of it
    url = part_url(job, 1, 1, "/failed")

    def post(node, credential, body):
        return srv.request("POST", url, body=body, token=credential,
                           headers={"X-Trainyard-Node": node})

    why = {"reason": "disk on fire"}
    assert post(agent.node_id, "tyn_wrong", why).status == 401
    assert post(agent.node_id, node_credential(other), why).status == 401
    assert post(other.node_id, node_credential(other), why).status == 403
    bad = post(agent.node_id, node_credential(agent), {"reason": ""})
    assert bad.status == 400 and "reason" in bad.text, bad
    ok = post(agent.node_id, node_credential(agent), why)
    assert ok.status == 200 and ok.json["state"] == "uploading", ok
    assert any("disk on fire" in m for m in events(srv, job))
    assert not any("disk on fire" in m and other.node_id in m for m in events(srv, job))


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_full_artifact_dir_is_an_event_and_no_complete_checkpoint(server_factory,
                                                                     agent_factory):
    art = harness.make_tmpdir("ty-full-art-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", art], check=True)
    try:
        srv = server_factory(extra_args=("--artifact-dir", art))
        agent = agent_factory(srv=srv, cpus=2)
        work = harness.make_tmpdir("ty-full-")
        with open(os.path.join(work, "train.py"), "w") as f:
            f.write(textwrap.dedent("""
                import os, tempfile, trainyard
                d = tempfile.mkdtemp(prefix="ty-full-")
                with open(os.path.join(d, "weights.bin"), "wb") as f:
                    f.write(os.urandom(10 << 20))
                trainyard.report({"loss": 1.0, "step": 1}, checkpoint=d)
            """))
        job = srv.submit({"name": "full", "entrypoint": [PY, "train.py"],
                          "working_dir": work})["id"]
        assert srv.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
        found = wait_event(srv, job, "the server cannot store it")
        assert found and found[0].startswith("checkpoint 1 (id ") and \
            f"part of node {agent.node_id} (rank 0): the server cannot store it" in found[0], \
            events(srv, job)
        [ck] = wait_checkpoints(srv, job, 1)
        r = srv.request("GET", f"/api/v1/checkpoints/{ck['id']}")
        assert r.json["artifact"]["state"] != "complete", r.json  # no part row was ever stored
        assert all(p["received_bytes"] < 4 << 20 for p in r.json["artifact"]["parts"]), r.json
        assert srv.request("GET", f"/api/v1/checkpoints/{ck['id']}/archive").status == 409
    finally:
        subprocess.run(["umount", "-l", art], check=False)


# Rank 0 reports its checkpoint and says so; rank 1 reports its own once the test says go. Both
# run until rank 1's report is acked, so the node counts two local ranks throughout.
GATED_WORKER = textwrap.dedent("""
    import os, tempfile, time
    import trainyard
    rank = trainyard.get_context().get_world_rank()
    work = os.getcwd()
    if rank == 1:
        while not os.path.exists(os.path.join(work, "go")):
            time.sleep(0.05)
    d = tempfile.mkdtemp(prefix=f"ty-gated-{rank}-")
    with open(os.path.join(d, f"rank-{rank}.txt"), "w") as f:
        f.write(f"rank {rank}")
    trainyard.report({"loss": 1.0, "step": 1}, checkpoint=d)
    open(os.path.join(work, f"reported-{rank}"), "w").close()
    while not os.path.exists(os.path.join(work, "reported-1")):  # both ranks local till then
        time.sleep(0.05)
""")


def test_agent_restarted_between_two_ranks_reports_still_uploads_the_round(server,
                                                                         agent_factory):
    # The count of the round's local reports is kept beside the round (upload.c): the agent that
    # saw rank 0's report is SIGKILLed, the next one sees rank 1's and completes the round.
    srv = server
    agent = agent_factory(cpus=2)
    work = harness.make_tmpdir("ty-ckpt-")
    os.chmod(work, 0o777)  # workers may run under uids of their own (TY_TEST_RUN_AS=auto)
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(GATED_WORKER)
    job = srv.submit({"name": "upload-restart", "entrypoint": [PY, "train.py"],
                      "working_dir": work, "scaling_config": {"num_workers": 2}})["id"]
    deadline = time.time() + 60
    while not os.path.exists(os.path.join(work, "reported-0")):  # acked: the agent counted it
        assert time.time() < deadline, agent.log_text()
        time.sleep(0.05)
    agent.kill()
    agent.start()
    assert "re-adopted job" in agent.log_text()
    open(os.path.join(work, "go"), "w").close()
    assert srv.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    [ck] = wait_artifacts(srv, job, 1, timeout=60)
    assert ck["artifact"]["state"] == "complete", (ck, agent.log_text())
    viewer = srv.create_token("restart-viewer", "viewer")
    raw = urllib.request.urlopen(urllib.request.Request(
        srv.url + f"/api/v1/checkpoints/{ck['id']}/archive",
        headers={"Authorization": f"Bearer {viewer}"})).read()
    assert untar(raw) == {"rank-0.txt": b"rank 0", "rank-1.txt": b"rank 1"}
