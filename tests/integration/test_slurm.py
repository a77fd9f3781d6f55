"""Jobs placed through Slurm (--slurm, issue 28, README "Slurm"): a real Slurm started by
scripts/slurm-local.sh (two emulated nodes, slurmrestd on a unix socket), a real server whose
jobs each run in a Slurm allocation of ephemeral agents. Where Slurm cannot start (not installed,
not root) these tests are skipped: CTest reports them Not Run. The one that needs no Slurm (a
slurmrestd that is not there) runs everywhere."""
import os
import subprocess
import textwrap

import pytest

import harness

PY = "/usr/bin/python3"
SCRIPT = os.path.join(harness.SOURCE_DIR, "scripts", "slurm-local.sh")

WORKER = textwrap.dedent("""
    import os, shutil, sys, tempfile
    import trainyard
    rank = trainyard.get_context().get_world_rank()
    print(f"rank {rank} of {os.environ['WORLD_SIZE']}", flush=True)
    d = tempfile.mkdtemp(prefix=f"ty-slurm-{rank}-")
    with open(os.path.join(d, f"rank-{rank}.txt"), "w") as f:
        f.write(str(rank))
    trainyard.report({"loss": 0.5 + rank, "step": 1}, checkpoint=d)
    shutil.rmtree(d)
""")


@pytest.fixture(scope="module")
def slurm():
    """A throwaway Slurm: yields (its directory, an environment for Slurm's commands)."""
    root = harness.make_tmpdir("ty-slurm-")
    r = subprocess.run([SCRIPT, "start", root, "2"], capture_output=True, text=True, timeout=120)
    if r.returncode == 77:
        pytest.skip(f"Slurm cannot start here: {r.stderr.strip()}")
    assert r.returncode == 0, r.stdout + r.stderr
    env = dict(os.environ, SLURM_CONF=os.path.join(root, "slurm.conf"))
    yield root, env
    subprocess.run([SCRIPT, "stop", root], timeout=60)


def slurm_state(env, slurm_job_id):
    r = subprocess.run(["squeue", "-h", "-j", str(slurm_job_id), "-o", "%T"], env=env,
                       capture_output=True, text=True, timeout=30)
    return r.stdout.strip()


def slurm_server(server_factory, root, **kw):
    env = {"TRAINYARD_AGENT_RUN_AS": os.environ.get("TY_TEST_RUN_AS", "none"),
           "TRAINYARD_AGENT_PORT_RANGE": harness.port_range(),
           "TRAINYARD_AGENT_STOP_GRACE_S": "3"}
    return server_factory(auth="none", env=env,
                          extra_args=["--slurm", f"unix:{root}/slurmrestd.sock", *kw.get("args", [])])


def submit(srv, name, workers=2, **more):
    work = harness.make_tmpdir("ty-slurm-job-")
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(WORKER)
    spec = {"name": name, "entrypoint": [PY, "train.py"], "working_dir": work,
            "scaling_config": {"num_workers": workers}, **more}
    return srv.submit(spec, token=None)["id"]


def events(srv, job):
    r = srv.request("GET", f"/api/v1/jobs/{job}/events", token=None)
    assert r.status == 200, r
    return [e["message"] for e in (r.json["events"] if isinstance(r.json, dict) else r.json)]


def test_two_worker_job_runs_in_one_allocation_over_two_nodes(server_factory, slurm):
    root, env = slurm
    srv = slurm_server(server_factory, root)
    job = submit(srv, "slurm-2w")
    done = srv.wait_job(job, {"SUCCEEDED", "FAILED", "STOPPED"}, timeout=90)
    assert done["status"] == "SUCCEEDED", done
    attempts = srv.request("GET", f"/api/v1/jobs/{job}/attempts", token=None).json
    attempts = attempts["attempts"] if isinstance(attempts, dict) else attempts
    slurm_id = attempts[0]["slurm_job_id"]
    assert isinstance(slurm_id, int) and slurm_id > 0, attempts
    workers = srv.request("GET", f"/api/v1/jobs/{job}/workers", token=None).json
    workers = workers["workers"] if isinstance(workers, dict) else workers
    nodes = {w["node_id"] for w in workers}
    assert nodes == {f"slurm-{slurm_id}-n1", f"slurm-{slurm_id}-n2"}, workers
    harness.wait_for(lambda: srv.request("GET", f"/api/v1/jobs/{job}/checkpoints",
                                         token=None).json["checkpoints"], 30, "a checkpoint")
    metrics = srv.request("GET", f"/api/v1/jobs/{job}/metrics?name=loss", token=None)
    assert metrics.status == 200 and "0.5" in metrics.text, metrics
    for rank in (0, 1):
        log = srv.request("GET", f"/api/v1/jobs/{job}/logs?rank={rank}", token=None)
        assert f"rank {rank} of 2" in log.text, log
    # The job is over: its allocation (and the agents in it) is gone.
    harness.wait_for(lambda: slurm_state(env, slurm_id) in ("", "COMPLETED", "CANCELLED"), 30,
                     "the allocation ending")


def test_a_busy_cluster_keeps_the_job_pending_with_slurms_reason_and_stop_cancels(
        server_factory, slurm):
    root, env = slurm
    # Both nodes held by someone else's job: ours waits in Slurm's queue.
    blocker = subprocess.run(["sbatch", "--parsable", "-N2", "--exclusive", "-o", "/dev/null",
                              "--wrap", "sleep 600"], env=env, capture_output=True, text=True,
                             timeout=30)
    assert blocker.returncode == 0, blocker.stderr
    blocker_id = blocker.stdout.strip().split(";")[0]
    try:
        srv = slurm_server(server_factory, root)
        job = submit(srv, "slurm-wait")
        harness.wait_for(lambda: "is pending (" in (srv.request(
            "GET", f"/api/v1/jobs/{job}", token=None).json.get("status_message") or ""), 30,
            "Slurm's pending reason as the status message")
        j = srv.request("GET", f"/api/v1/jobs/{job}", token=None).json
        assert j["status"] == "PENDING", j
        assert any("is pending (" in m for m in events(srv, job)), events(srv, job)
        slurm_id = int(j["status_message"].split("Slurm job ")[1].split()[0])
        assert slurm_state(env, slurm_id) == "PENDING"
        r = srv.request("POST", f"/api/v1/jobs/{job}/stop", token=None)
        assert r.status == 202, r
        srv.wait_job(job, {"STOPPED"}, timeout=30)
        harness.wait_for(lambda: slurm_state(env, slurm_id) in ("", "CANCELLED"), 30,
                         "scancel of the allocation")
        # More nodes than the partition has: Slurm rejects it, the job fails with its words.
        big = submit(srv, "slurm-big", workers=3)
        done = srv.wait_job(big, {"FAILED", "SUCCEEDED"}, timeout=30)
        assert done["status"] == "FAILED", done
        assert "Slurm rejected the allocation" in done["status_message"], done
    finally:
        subprocess.run(["scancel", blocker_id], env=env, timeout=30)


def test_slurmrestd_unreachable_keeps_the_job_pending_with_the_reason(server_factory):
    root = harness.make_tmpdir("ty-noslurm-")
    srv = slurm_server(server_factory, root)
    job = submit(srv, "slurm-down")
    harness.wait_for(lambda: "slurmrestd unreachable" in (srv.request(
        "GET", f"/api/v1/jobs/{job}", token=None).json.get("status_message") or ""), 30,
        "the reason as the status message")
    assert srv.request("GET", f"/api/v1/jobs/{job}", token=None).json["status"] == "PENDING"
    assert any("slurmrestd unreachable" in m for m in events(srv, job)), events(srv, job)
