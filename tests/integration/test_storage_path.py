"""run_config.storage_path (issue 11, docs/artifacts.md): checkpoints on a directory every node
and the server mount, instead of uploads. The agents copy each node's merged directory of a
round to <storage_path>/job-<j>/attempt-<a>/checkpoint-<k>/node-<node>/ and register it; the
server verifies it there by its manifest and records it as the part's location. Real server,
agents and Python workers; the "shared" filesystem is a temporary directory of this machine."""
import hashlib
import io
import os
import tarfile
import textwrap
import time
import urllib.request

import pytest

import harness
from test_artifacts import node_request, wait_artifacts
from test_checkpoints import PY, WORKER, checkpoints
from test_resume import READER, run_script, seen


def files_under(root):
    """{relative path: bytes} of every regular file under root."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = os.path.join(dirpath, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = f.read()
    return out


def written(rank, k):
    """What WORKER's rank wrote in round k."""
    return {f"rank-{rank}.txt": f"rank {rank} round {k}".encode(),
            f"sub/part-{rank}.bin": b"x" * (100 * (rank + 1))}


@pytest.fixture
def shared(database):
    """A server that allows storage paths under a temporary directory, and that directory."""
    root = harness.make_tmpdir("ty-shared-")
    srv = harness.Server(database_url=database,
                         extra_args=["--storage-path-allow", f"/nonexistent-ty:{root}"]).start()
    try:
        yield srv, root
    finally:
        assert srv.stop() == 0, srv.log_text()


def submit_worker(srv, storage, name, spread=False, **run_config):
    work = harness.make_tmpdir("ty-sp-")
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(WORKER)
    return srv.submit({"name": name, "entrypoint": [PY, "train.py"], "working_dir": work,
                       "scaling_config": {"num_workers": 2, "placement_strategy":
                                          "STRICT_SPREAD" if spread else "PACK"},
                       "run_config": {"storage_path": storage, **run_config}})["id"]


def part_dir(storage, job, k, node):
    return os.path.join(storage, f"job-{job}", "attempt-1", f"checkpoint-{k}", f"node-{node}")


def test_two_rank_job_checkpoints_to_the_storage_path(shared):
    srv, root = shared
    storage = os.path.join(root, "runs")
    a = harness.Agent(srv, cpus=1).start()
    b = harness.Agent(srv, cpus=1).start()
    try:
        job = submit_worker(srv, storage, "shared-2", spread=True)
        done = srv.wait_job(job, {"SUCCEEDED", "FAILED"})
        assert done["status"] == "SUCCEEDED", (done, a.log_text())
        workers = srv.request("GET", f"/api/v1/jobs/{job}/workers").json["workers"]
        node_of = {w["rank"]: w["node_id"] for w in workers}
        assert sorted(node_of.values()) == sorted([a.node_id, b.node_id])
        # A checkpoint reads "complete" once every node of its location so far has its part; a
        # slower node's report can still add its node (and part) after that (see the closing
        # note of 2026-11-27): wait until both nodes' parts are in.

        def both_parts():
            cks = wait_artifacts(srv, job, 3)
            for ck in cks:
                got = srv.request("GET", f"/api/v1/checkpoints/{ck['id']}").json
                if ({p["node_id"] for p in got["artifact"]["parts"]} != set(node_of.values())
                        or got["artifact"]["state"] != "complete"):
                    return None
            return cks
        cks = harness.wait_for(both_parts, 30, "both nodes' parts of every checkpoint")
        assert [c["artifact"]["state"] for c in cks] == ["complete"] * 3, (cks, a.log_text())
        for ck in cks:
            k = ck["index"]
            got = srv.request("GET", f"/api/v1/checkpoints/{ck['id']}").json
            parts = {p["node_id"]: p for p in got["artifact"]["parts"]}
            assert sorted(parts) == sorted(node_of.values())
            for rank, node in node_of.items():
                d = part_dir(storage, job, k, node)
                assert parts[node]["path"] == d and parts[node]["state"] == "complete", parts
                # The files there are what the worker of that node wrote in round k.
                assert files_under(d) == written(rank, k)
                assert parts[node]["file_count"] == 2
            # The download packs the shared directories: every rank's files.
            url = srv.url + f"/api/v1/checkpoints/{ck['id']}/archive"
            auth = {"Authorization": f"Bearer {srv.admin_token}"}
            raw = urllib.request.urlopen(urllib.request.Request(url, headers=auth)).read()
            with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
                names = {os.path.normpath(m.name): tar.extractfile(m).read()
                         for m in tar.getmembers() if m.isfile()}
            assert names == {**written(0, k), **written(1, k)}
            # Packed again for a resumed download: the same bytes from the offset asked for.
            req = urllib.request.Request(url, headers={**auth, "Range": "bytes=700-"})
            with urllib.request.urlopen(req) as resp:
                assert resp.status == 206 and raw[:700] + resp.read() == raw
        # Nothing went through the artifact store.
        store = os.path.join(srv.data_dir, "artifacts")
        assert files_under(store) == {}, sorted(files_under(store))
        assert "stored in " + storage in a.log_text()
    finally:
        assert a.stop() == 0, a.log_text()
        assert b.stop() == 0, b.log_text()


def resume_elsewhere(srv, storage, name, agents, **b_args):
    """WORKER checkpoints to `storage` on a first agent, which is then drained; a fresh agent B
    (b_args) that holds no copy runs a two-rank READER job resuming from the last checkpoint.
    Every agent started is appended to `agents` (the caller stops them). Returns (writer job,
    its last checkpoint, the reader's work directory, the reader's final job)."""
    a = harness.Agent(srv, cpus=2).start()
    agents.append(a)
    job = submit_worker(srv, storage, f"{name}-writer")
    assert srv.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    cks = wait_artifacts(srv, job, 3)
    assert all(c["artifact"]["state"] == "complete" for c in cks), cks
    last = next(c for c in cks if c["index"] == 3)
    # A takes no new work: the resumed job runs on B.
    assert srv.request("POST", f"/api/v1/nodes/{a.node_id}/drain").status == 200
    agents.append(harness.Agent(srv, cpus=2, **b_args).start())
    _, work, done = run_script(srv, READER, f"{name}-reader", 2,
                               resume_from_checkpoint=last["id"])
    assert done["status"] == "SUCCEEDED", (done, agents[-1].log_text())
    return job, last, work, done


def stop_all(agents):
    for ag in agents:
        assert ag.stop() == 0, ag.log_text()


def test_resume_on_another_node_copies_from_the_storage_path(shared):
    srv, root = shared
    storage = os.path.join(root, "resume")
    agents = []
    try:
        job, last, work, _ = resume_elsewhere(srv, storage, "shared", agents)
        a, b = agents
        cache = os.path.join(os.path.realpath(b.data_dir), "checkpoints", "fetched",
                             last["artifact"]["sha256"])
        expect = {n: v.hex() for n, v in {**written(0, 3), **written(1, 3)}.items()}
        for rank in (0, 1):
            s = seen(work, rank)
            assert s["env"] == cache and s["files"] == expect, (s, b.log_text())
        assert "copied from shared storage" in b.log_text(), b.log_text()
        assert "fetched from the server" not in b.log_text()
        # The workers read a private copy: the stored one is as the writer left it.
        assert files_under(part_dir(storage, job, 3, a.node_id)) == {**written(0, 3),
                                                                     **written(1, 3)}
    finally:
        stop_all(agents)


def test_a_node_that_cannot_see_the_storage_path_fetches_the_checkpoint_from_the_server(shared):
    """Node B does not mount the job's storage path (here: covered by an empty tmpfs in B's own
    mount namespace): it fetches the same checkpoint from the server, which reads it there."""
    srv, root = shared
    agents = []
    try:
        _, _, work, _ = resume_elsewhere(srv, os.path.join(root, "unmounted"), "hidden", agents,
                                         hide=[root])
        b = agents[-1]
        expect = {n: v.hex() for n, v in {**written(0, 3), **written(1, 3)}.items()}
        for rank in (0, 1):
            assert seen(work, rank)["files"] == expect, (seen(work, rank), b.log_text())
        assert "is not readable on this node: fetching it from the server" in b.log_text()
        assert "fetched from the server" in b.log_text(), b.log_text()
    finally:
        stop_all(agents)


def test_retention_deletes_from_the_storage_path(shared):
    srv, root = shared
    storage = os.path.join(root, "keep")
    a = harness.Agent(srv, cpus=2).start()
    try:
        job = submit_worker(srv, storage, "shared-keep",
                            checkpoint_config={"num_to_keep": 1})
        assert srv.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
        deadline_cks = None
        for _ in range(200):
            deadline_cks = checkpoints(srv, job)
            states = sorted((c["index"], c["artifact"]["state"]) for c in deadline_cks)
            if states == [(1, "deleted"), (2, "deleted"), (3, "complete")]:
                break
            time.sleep(0.1)
        assert states == [(1, "deleted"), (2, "deleted"), (3, "complete")], deadline_cks
        # "deleted" is recorded before the files go: their removal follows within moments.
        attempt = os.path.join(storage, f"job-{job}", "attempt-1")
        for _ in range(200):
            if sorted(os.listdir(attempt)) == ["checkpoint-3"]:
                break
            time.sleep(0.1)
        assert sorted(os.listdir(attempt)) == ["checkpoint-3"], a.log_text()
        assert files_under(part_dir(storage, job, 3, a.node_id)) == {**written(0, 3),
                                                                     **written(1, 3)}
    finally:
        assert a.stop() == 0, a.log_text()


def problem(r, field="run_config.storage_path"):
    assert r.status == 400, r
    assert r.json["errors"][0]["field"] == field, r.json
    return r.json["errors"][0]["detail"]


def test_refused_storage_paths(shared):
    srv, root = shared
    user = srv.create_token("sp-user", "user")
    for path, why in ((f"{root}/../etc", "normalised"), (f"{root}/a/./b", "normalised"),
                      (f"{root}//a", "normalised"), (f"{root}/a/", "normalised"),
                      ("/etc/trainyard", "under a directory this server allows"),
                      (root + "x", "under a directory this server allows"),
                      ("s3://bucket/runs", "absolute filesystem path")):
        r = srv.request("POST", "/api/v1/jobs", {"entrypoint": "true",
                                                 "run_config": {"storage_path": path}},
                        token=user)
        assert why in problem(r), (path, r.json)
    assert srv.request("GET", "/api/v1/jobs").json["jobs"] == []


def test_a_server_without_an_allow_list_refuses_every_storage_path(server):
    r = server.request("POST", "/api/v1/jobs", {"entrypoint": "true",
                                                "run_config": {"storage_path": "/mnt/shared"}})
    assert "--storage-path-allow" in problem(r)
    assert server.request("GET", "/api/v1/jobs").json["jobs"] == []


def test_only_a_node_of_the_attempt_may_register_a_shared_part(shared):
    srv, root = shared
    storage = os.path.join(root, "auth")
    a = harness.Agent(srv, cpus=2).start()
    b = harness.Agent(srv, cpus=1).start()
    try:
        assert srv.request("POST", f"/api/v1/nodes/{b.node_id}/drain").status == 200
        job = submit_worker(srv, storage, "shared-auth")
        assert srv.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
        assert len(wait_artifacts(srv, job, 3)) == 3
        url = f"/api/v1/agent/checkpoints/{job}/1/1/shared"
        body = {"sha256": "0" * 64, "file_count": 2}
        r = node_request(srv, b, "POST", url, body)  # B ran nothing of the job
        assert r.status == 403, r
        r = node_request(srv, a, "POST", url, body, credential="tyn_not-the-credential")
        assert r.status == 401, r
        # A's own part with a wrong manifest digest: refused, and the stored part stays.
        r = node_request(srv, a, "POST", url, body)
        assert r.status == 422, r
        digest = hashlib.sha256(b"").hexdigest()
        assert node_request(srv, a, "POST", f"/api/v1/agent/checkpoints/{job}/1/9/shared",
                            {"sha256": digest, "file_count": 0}).status == 422
    finally:
        assert a.stop() == 0, a.log_text()
        assert b.stop() == 0, b.log_text()


def test_files_belong_to_the_uid_the_workers_ran_under(shared):
    srv, root = shared
    storage = os.path.join(root, "uids")
    a = harness.Agent(srv, cpus=2, env={"TRAINYARD_AGENT_RUN_AS": "auto"}).start()
    try:
        work = harness.make_tmpdir("ty-sp-uid-")
        os.chmod(work, 0o777)
        with open(os.path.join(work, "train.py"), "w") as f:
            f.write(WORKER + "\nopen(f'uid-{rank}', 'w').write(str(os.getuid()))\n")
        job = srv.submit({"name": "shared-uid", "entrypoint": [PY, "train.py"],
                          "working_dir": work, "scaling_config": {"num_workers": 2},
                          "run_config": {"storage_path": storage}})["id"]
        done = srv.wait_job(job, {"SUCCEEDED", "FAILED"})
        assert done["status"] == "SUCCEEDED", (done, a.log_text(), a.worker_log(job, 0))
        assert all(c["artifact"]["state"] == "complete" for c in wait_artifacts(srv, job, 3))
        uid = int(open(os.path.join(work, "uid-0")).read())
        assert uid != 0
        d = part_dir(storage, job, 3, a.node_id)
        owners = {os.lstat(os.path.join(dp, n)).st_uid
                  for dp, dirs, names in os.walk(d) for n in dirs + names}
        assert owners == {uid} and os.lstat(d).st_uid == uid, (owners, uid)
    finally:
        assert a.stop() == 0, a.log_text()


# Round 1, then waits for the file "go" in its working directory, then round 2.
GATED = textwrap.dedent("""
    import os, shutil, tempfile, time
    import trainyard
    rank = trainyard.get_context().get_world_rank()
    for k in (1, 2):
        if k == 2:
            while not os.path.exists("go"):
                time.sleep(0.05)
        d = tempfile.mkdtemp(prefix=f"ty-gated-{rank}-")
        with open(os.path.join(d, f"rank-{rank}.txt"), "w") as f:
            f.write(f"rank {rank} round {k}")
        trainyard.report({"step": k}, checkpoint=d)
        shutil.rmtree(d)
""")


def test_an_agent_restarted_mid_job_still_copies_to_the_storage_path(shared):
    srv, root = shared
    storage = os.path.join(root, "restart")
    a = harness.Agent(srv, cpus=2).start()
    try:
        work = harness.make_tmpdir("ty-sp-gated-")
        os.chmod(work, 0o777)
        with open(os.path.join(work, "train.py"), "w") as f:
            f.write(GATED)
        job = srv.submit({"name": "shared-restart", "entrypoint": [PY, "train.py"],
                          "working_dir": work, "scaling_config": {"num_workers": 2},
                          "run_config": {"storage_path": storage}})["id"]
        [ck1] = wait_artifacts(srv, job, 1)
        assert ck1["artifact"]["state"] == "complete", ck1
        a.kill()
        a.start()  # re-adopts the workers, storage path included (their records)
        open(os.path.join(work, "go"), "w").close()
        done = srv.wait_job(job, {"SUCCEEDED", "FAILED"})
        assert done["status"] == "SUCCEEDED", (done, a.log_text())
        cks = wait_artifacts(srv, job, 2)
        assert [c["artifact"]["state"] for c in cks] == ["complete"] * 2, cks
        assert files_under(part_dir(storage, job, 2, a.node_id)) == {
            "rank-0.txt": b"rank 0 round 2", "rank-1.txt": b"rank 1 round 2"}
        assert files_under(os.path.join(srv.data_dir, "artifacts")) == {}
    finally:
        assert a.stop() == 0, a.log_text()
