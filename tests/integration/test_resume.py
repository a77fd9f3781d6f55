"""resume_from_checkpoint: a job starts from a checkpoint another job registered. The server
checks at submit that the checkpoint exists (422 otherwise) and, at launch, hands each node the
directory of the checkpoint it holds as checkpoint_dir, which the agent passes to the workers as
TRAINYARD_CHECKPOINT_DIR (trainyard.get_checkpoint(), ty_checkpoint_dir())."""
import json
import os
import textwrap

import harness
from test_checkpoints import PY, checkpoints, wait_checkpoints

# One checkpoint from every rank: a file of its own and one in a subdirectory.
WRITER = textwrap.dedent("""
    import os, shutil, tempfile
    import trainyard
    rank = trainyard.get_context().get_world_rank()
    d = tempfile.mkdtemp(prefix=f"ty-resume-{rank}-")
    with open(os.path.join(d, f"rank-{rank}.txt"), "w") as f:
        f.write(f"weights of rank {rank}")
    os.mkdir(os.path.join(d, "sub"))
    with open(os.path.join(d, "sub", f"part-{rank}.bin"), "wb") as f:
        f.write(bytes([rank]) * (10 * (rank + 1)))
    trainyard.report({"loss": 0.5, "step": 7}, checkpoint=d)
    shutil.rmtree(d)
""")

# Writes what it finds at its resume point to seen-<rank>.json in its working directory.
READER = textwrap.dedent("""
    import json, os
    import trainyard
    rank = trainyard.get_context().get_world_rank()
    ck = trainyard.get_checkpoint()
    seen = {"env": os.environ["TRAINYARD_CHECKPOINT_DIR"], "checkpoint": ck, "files": {}}
    if ck:
        for root, _, names in os.walk(ck):
            for n in names:
                p = os.path.join(root, n)
                with open(p, "rb") as f:
                    seen["files"][os.path.relpath(p, ck)] = f.read().hex()
    with open(f"seen-{rank}.json", "w") as f:
        json.dump(seen, f)
""")


def run_script(srv, script, name, workers, **spec):
    work = harness.make_tmpdir("ty-resume-")
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(script)
    job = srv.submit({"name": name, "entrypoint": [PY, "train.py"], "working_dir": work,
                      "scaling_config": {"num_workers": workers}, **spec})["id"]
    done = srv.wait_job(job, {"SUCCEEDED", "FAILED"})
    return job, work, done


def seen(work, rank):
    with open(os.path.join(work, f"seen-{rank}.json")) as f:
        return json.load(f)


def events(srv, job):
    return srv.request("GET", f"/api/v1/jobs/{job}/events").json["events"]


def test_job_resumes_from_a_checkpoint_of_another_job(server, agent_factory):
    agent = agent_factory(cpus=2)
    first, _, done = run_script(server, WRITER, "resume-writer", 2)
    assert done["status"] == "SUCCEEDED", (done, agent.worker_log(first, 0))
    [ck] = wait_checkpoints(server, first, 1)
    path = ck["location"][0]["path"]

    second, work, done = run_script(server, READER, "resume-reader", 2,
                                    resume_from_checkpoint=ck["id"])
    assert done["status"] == "SUCCEEDED", (done, agent.worker_log(second, 0))
    assert done["spec"]["resume_from_checkpoint"] == ck["id"]
    expect = {"rank-0.txt": b"weights of rank 0".hex(), "rank-1.txt": b"weights of rank 1".hex(),
              "sub/part-0.bin": (b"\x00" * 10).hex(), "sub/part-1.bin": (b"\x01" * 20).hex()}
    for rank in (0, 1):
        s = seen(work, rank)
        assert s["env"] == path and s["checkpoint"] == path, s
        assert s["files"] == expect, s
    assert not any("holds no copy" in (e["message"] or "") for e in events(server, second))


def test_job_without_resume_gets_no_checkpoint_dir(server, agent_factory):
    agent_factory(cpus=1)
    job, work, done = run_script(server, READER, "resume-none", 1)
    assert done["status"] == "SUCCEEDED", done
    assert seen(work, 0) == {"env": "", "checkpoint": None, "files": {}}


def test_resume_from_a_checkpoint_that_does_not_exist_is_422(server):
    before = server.request("GET", "/api/v1/jobs").json["jobs"]
    r = server.request("POST", "/api/v1/jobs", {"entrypoint": "true",
                                                "resume_from_checkpoint": 424242})
    assert r.status == 422, r
    assert {k.lower(): v for k, v in r.headers.items()}["content-type"].startswith(
        "application/problem+json")
    assert r.json["code"] == "checkpoint-not-found" and r.json["status"] == 422
    assert r.json["errors"] == [{"field": "resume_from_checkpoint",
                                 "detail": "checkpoint 424242 does not exist"}]
    assert "checkpoint 424242 does not exist" in r.json["detail"]
    assert server.request("GET", "/api/v1/jobs").json["jobs"] == before
    # A malformed id is still the validator's 400.
    r = server.request("POST", "/api/v1/jobs", {"entrypoint": "true",
                                                "resume_from_checkpoint": 0})
    assert r.status == 400 and r.json["errors"][0]["field"] == "resume_from_checkpoint", r


def test_node_without_a_copy_starts_fresh_and_the_job_says_so(server, agent_factory):
    # No uploads (--api-url none), so the artifact store has no copy to fetch either
    # (test_artifacts.py: a node without a copy fetches a stored one).
    a = agent_factory(cpus=1, env={"TRAINYARD_API_URL": "none"})
    b = agent_factory(cpus=1, env={"TRAINYARD_API_URL": "none"})
    first, _, done = run_script(server, WRITER, "resume-one-node", 1)
    assert done["status"] == "SUCCEEDED", done
    [ck] = wait_checkpoints(server, first, 1)
    [loc] = ck["location"]
    holder = loc["node_id"]
    other = b.node_id if holder == a.node_id else a.node_id

    second, work, done = run_script(server, READER, "resume-two-nodes", 2,
                                    resume_from_checkpoint=ck["id"])
    assert done["status"] == "SUCCEEDED", done
    workers = server.request("GET", f"/api/v1/jobs/{second}/workers").json["workers"]
    node_of = {w["rank"]: w["node_id"] for w in workers}
    assert set(node_of.values()) == {a.node_id, b.node_id}
    for rank, node in node_of.items():
        s = seen(work, rank)
        if node == holder:
            assert s["env"] == loc["path"], s
            assert s["files"] == {"rank-0.txt": b"weights of rank 0".hex(),
                                  "sub/part-0.bin": (b"\x00" * 10).hex()}, s
        else:
            assert s == {"env": "", "checkpoint": None, "files": {}}, s
    warned = [e for e in events(server, second) if "holds no copy" in (e["message"] or "")]
    assert len(warned) == 1, events(server, second)
    assert warned[0]["attempt"] == 1
    assert warned[0]["message"].startswith(
        f"node {other} holds no copy of checkpoint {ck['id']}"), warned
    assert holder not in warned[0]["message"]


def fashion_mnist_spec(**config):
    with open(os.path.join(harness.SOURCE_DIR, "examples/fashion_mnist/job.json")) as f:
        spec = json.load(f)
    spec["entrypoint"] = [os.path.join(harness.BUILD_DIR, "examples/fashion_mnist/fashion_mnist")]
    spec["working_dir"] = os.path.abspath(harness.SOURCE_DIR)
    spec["train_loop_config"].update({"limit_train": 6000, "limit_test": 1000,
                                      "checkpoint_every": 1, "min_accuracy": 0, **config})
    return spec


def rank0_series(srv, job, name):
    m = srv.request("GET", f"/api/v1/jobs/{job}/metrics?name={name}&rank=0").json["metrics"]
    return [(p["step"], p["value"]) for p in m]


def test_fashion_mnist_resumes_at_the_next_epoch(server, agent_factory):
    agent = agent_factory(cpus=2)
    first = server.submit(fashion_mnist_spec(epochs=1))["id"]
    done = server.wait_job(first, {"SUCCEEDED", "FAILED"}, timeout=300)
    assert done["status"] == "SUCCEEDED", (done, agent.worker_log(first, 0))
    [ck] = wait_checkpoints(server, first, 1)
    steps = ck["step"]
    assert steps > 0 and rank0_series(server, first, "epoch") == [(steps, 1)]

    spec = fashion_mnist_spec(epochs=2)
    spec["resume_from_checkpoint"] = ck["id"]
    second = server.submit(spec)["id"]
    done = server.wait_job(second, {"SUCCEEDED", "FAILED"}, timeout=300)
    log = agent.worker_log(second, 0)
    assert done["status"] == "SUCCEEDED", (done, log)
    assert f"resumed from {ck['location'][0]['path']} after epoch 1" in log, log
    # One epoch left: reported as epoch 2, its optimizer steps counted on from the checkpoint's.
    assert rank0_series(server, second, "epoch") == [(2 * steps, 2)]
    [ck2] = wait_checkpoints(server, second, 1)
    assert ck2["step"] == 2 * steps and ck2["index"] == 1
    # The same checkpoint (its artifact's upload state may have moved on meanwhile).
    assert [dict(c, artifact=None) for c in checkpoints(server, first)] == [dict(ck, artifact=None)]
