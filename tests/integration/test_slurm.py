"""Jobs placed through Slurm (--slurm, issue 28, README "Slurm"): a real Slurm started by
scripts/slurm-local.sh (two emulated nodes, slurmrestd on a unix socket and on TCP with JWT), a real server whose
jobs each run in a Slurm allocation of ephemeral agents. Where Slurm cannot start (not installed,
not root) these tests are skipped: CTest reports them Not Run. The one that needs no Slurm (a
slurmrestd that is not there) runs everywhere."""
import base64
import glob
import hashlib
import hmac
import json
import os
import re
import signal
import subprocess
import textwrap
import time

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

# torch DDP over gloo from the environment the agents set (env://): two steps of a tiny model;
# each rank checks that DDP's averaged gradients left both replicas with the same weights.
DDP = textwrap.dedent("""
    import os, shutil, tempfile
    import torch, torch.distributed as dist
    import trainyard
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(1 + rank)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    for step in (1, 2):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        w = model.module.weight.detach().clone()
        ws = [torch.zeros_like(w) for _ in range(world)]
        dist.all_gather(ws, w)
        assert all(torch.equal(ws[0], o) for o in ws), ws
        d = tempfile.mkdtemp(prefix=f"ty-slurm-{rank}-")
        if rank == 0:
            torch.save(model.module.state_dict(), os.path.join(d, "model.pt"))
        trainyard.report({"loss": loss.item(), "step": step}, checkpoint=d)
        shutil.rmtree(d)
    print(f"rank {rank} of {world}: replicas in sync after 2 steps", flush=True)
    dist.destroy_process_group()
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


def agents_of(slurm_job_id):
    """The pids of the processes started for Slurm job slurm_job_id's agents (the agents and
    their workers, which inherit TRAINYARD_NODE_ID)."""
    mark = f"TRAINYARD_NODE_ID=slurm-{slurm_job_id}-".encode()
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if mark in f.read():
                    pids.append(int(pid))
        except OSError:
            pass
    return pids


def agent_env(slurm_job_id, node):
    """The environment of Slurm job slurm_job_id's agent on node, as a dict."""
    mark = f"TRAINYARD_NODE_ID=slurm-{slurm_job_id}-{node}".encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() != "trainyard-agent":
                    continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if mark in env:
            return dict(x.decode().split("=", 1) for x in env if b"=" in x)
    return None


def cluster_name(env):
    with open(env["SLURM_CONF"]) as f:
        return next(x.split("=", 1)[1].strip() for x in f if x.startswith("ClusterName="))


def attempts_of(srv, job):
    r = srv.request("GET", f"/api/v1/jobs/{job}/attempts", token=None).json
    return r["attempts"] if isinstance(r, dict) else r


def slurm_server(server_factory, root, url=None, args=()):
    # The agents give up 3 s after losing the server (the allocations' default: 30 s).
    env = {"TRAINYARD_AGENT_RUN_AS": os.environ.get("TY_TEST_RUN_AS", "none"),
           "TRAINYARD_AGENT_PORT_RANGE": harness.port_range(),
           "TRAINYARD_AGENT_STOP_GRACE_S": "3", "TRAINYARD_AGENT_EPHEMERAL": "3"}
    return server_factory(auth="none", env=env,
                          extra_args=["--slurm", url or f"unix:{root}/slurmrestd.sock", *args])


def submit(srv, name, workers=2, script=WORKER, **more):
    work = harness.make_tmpdir("ty-slurm-job-")
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(script)
    spec = {"name": name, "entrypoint": [PY, "train.py"], "working_dir": work,
            "scaling_config": {"num_workers": workers}, **more}
    return srv.submit(spec, token=None)["id"]


def events(srv, job):
    r = srv.request("GET", f"/api/v1/jobs/{job}/events", token=None)
    assert r.status == 200, r
    return [e["message"] for e in (r.json["events"] if isinstance(r.json, dict) else r.json)]


def test_torch_ddp_job_runs_in_one_allocation_over_two_nodes(server_factory, slurm):
    root, env = slurm
    srv = slurm_server(server_factory, root)
    job = submit(srv, "slurm-ddp", script=DDP)
    done = srv.wait_job(job, {"SUCCEEDED", "FAILED", "STOPPED"}, timeout=90)
    assert done["status"] == "SUCCEEDED", done
    attempts = srv.request("GET", f"/api/v1/jobs/{job}/attempts", token=None).json
    attempts = attempts["attempts"] if isinstance(attempts, dict) else attempts
    slurm_id = attempts[0]["slurm_job_id"]
    assert isinstance(slurm_id, int) and slurm_id > 0, attempts
    # Slurm never requeues it (a lost node is the server's restart, on a new allocation).
    show = subprocess.run(["scontrol", "show", "job", "-o", str(slurm_id)], env=env,
                          capture_output=True, text=True, timeout=30).stdout
    assert "Requeue=0" in show, show
    workers = srv.request("GET", f"/api/v1/jobs/{job}/workers", token=None).json
    workers = workers["workers"] if isinstance(workers, dict) else workers
    nodes = {w["node_id"] for w in workers}
    assert nodes == {f"slurm-{slurm_id}-n1", f"slurm-{slurm_id}-n2"}, workers
    harness.wait_for(lambda: srv.request("GET", f"/api/v1/jobs/{job}/checkpoints",
                                         token=None).json["checkpoints"], 30, "a checkpoint")
    metrics = srv.request("GET", f"/api/v1/jobs/{job}/metrics?name=loss", token=None)
    assert metrics.status == 200, metrics
    points = {(m["rank"], m["step"]) for m in metrics.json["metrics"] if m["name"] == "loss"}
    assert points == {(0, 1), (0, 2), (1, 1), (1, 2)}, metrics.json
    for rank in (0, 1):
        log = srv.request("GET", f"/api/v1/jobs/{job}/logs?rank={rank}", token=None)
        assert f"rank {rank} of 2: replicas in sync after 2 steps" in log.text, log
    # The job is over: its allocation (and the agents in it) is gone, and so are the agents'
    # data directories (their checkpoint copies: the store holds the checkpoint).
    harness.wait_for(lambda: slurm_state(env, slurm_id) in ("", "COMPLETED", "CANCELLED"), 30,
                     "the allocation ending")
    harness.wait_for(lambda: not agents_of(slurm_id), 30, "the agents exiting")
    cluster = cluster_name(env)
    left = f"/tmp/trainyard-slurm/{cluster}/{slurm_id}-*"
    try:
        harness.wait_for(lambda: not glob.glob(left), 30, "the allocation's data directory removed")
    except AssertionError as e:
        raise AssertionError(f"{e}: {glob.glob(left + '/**', recursive=True)}")


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


def write_token(path, token):
    """Replaces the token file as a user would (a new file renamed over the old)."""
    with open(path + ".new", "w") as f:
        f.write(token + "\n")
    os.replace(path + ".new", path)


def forged_token(user):
    """A well-formed Slurm JWT for user, valid for an hour, signed with a key Slurm does not have."""
    def b64(b):
        return base64.urlsafe_b64encode(b).rstrip(b"=").decode()
    now = int(time.time())
    head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64(json.dumps({"exp": now + 3600, "iat": now, "sun": user}).encode())
    sig = b64(hmac.new(os.urandom(32), f"{head}.{body}".encode(), hashlib.sha256).digest())
    return f"{head}.{body}.{sig}"


def scontrol_token(env, lifespan):
    r = subprocess.run(["scontrol", "token", f"lifespan={lifespan}"], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout.startswith("SLURM_JWT="), r
    return r.stdout.strip()


def test_a_refused_or_expired_token_keeps_the_job_pending_until_a_good_one(
        server_factory, slurm):
    """slurmrestd on TCP with JWT (--slurm http://..., --slurm-token-file): a token Slurm refuses
    or one past its expiry leaves the job PENDING with the reason, never FAILED; a good token
    written to the file is read at the next look and the job runs."""
    root, env = slurm
    with open(os.path.join(root, "slurmrestd.port")) as f:
        url = f"http://127.0.0.1:{f.read().strip()}"
    token = os.path.join(harness.make_tmpdir("ty-slurm-token-"), "token")
    write_token(token, forged_token("root"))
    srv = slurm_server(server_factory, root, url=url, args=["--slurm-token-file", token])
    job = submit(srv, "slurm-token", workers=1)

    def message():
        j = srv.request("GET", f"/api/v1/jobs/{job}", token=None).json
        assert j["status"] == "PENDING", j
        return j.get("status_message") or ""
    harness.wait_for(lambda: "refusing the token of --slurm-token-file for user root" in message(),
                     30, "the refused token as the reason")
    assert any("refusing the token" in m for m in events(srv, job)), events(srv, job)
    write_token(token, scontrol_token(env, 1))
    harness.wait_for(lambda: "--slurm-token-file " + token + " expired at" in message(), 30,
                     "the expired token as the reason")
    write_token(token, scontrol_token(env, 600))
    done = srv.wait_job(job, {"SUCCEEDED", "FAILED", "STOPPED"}, timeout=60)
    assert done["status"] == "SUCCEEDED", done
    assert attempts_of(srv, job)[0]["slurm_job_id"] > 0


WAITER = textwrap.dedent("""
    import os, shutil, sys, tempfile, time
    import trainyard
    ctx = trainyard.get_context()
    rank, attempt = ctx.get_world_rank(), ctx.get_attempt()
    d = tempfile.mkdtemp(prefix=f"ty-slurm-{rank}-")
    with open(os.path.join(d, f"rank-{rank}.txt"), "w") as f:
        f.write(str(attempt))
    # The first attempt's checkpoint may take a while to upload (BALLAST_MB of zeros, sparse).
    with open(os.path.join(d, "ballast"), "wb") as f:
        f.truncate(int(os.environ.get("BALLAST_MB", "0")) << 20 if attempt == 1 else 0)
    trainyard.report({"loss": 1.0 / attempt, "step": attempt}, checkpoint=d)
    shutil.rmtree(d)
    # The first attempt waits for the test's go (a file); later ones end at once.
    while attempt == 1 and not os.path.exists("go"):
        time.sleep(0.05)
""")


def submit_waiter(srv, name, **more):
    work = harness.make_tmpdir("ty-slurm-job-")
    os.chmod(work, 0o777)
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(WAITER)
    spec = {"name": name, "entrypoint": [PY, "train.py"], "working_dir": work,
            "scaling_config": {"num_workers": 2}, **more}
    return srv.submit(spec, token=None)["id"], work


def running_with_checkpoint(srv, job, env):
    try:
        harness.wait_for(lambda: srv.request("GET", f"/api/v1/jobs/{job}", token=None).json[
            "status"] == "RUNNING" and srv.request("GET", f"/api/v1/jobs/{job}/checkpoints",
                                                   token=None).json["checkpoints"], 60,
            "the job running with a checkpoint")
    except AssertionError as e:
        squeue = subprocess.run(["squeue", "-a", "-o", "%i %T %r %N"], env=env,
                                capture_output=True, text=True, timeout=30).stdout
        sinfo = subprocess.run(["sinfo", "-N", "-o", "%N %T %E"], env=env, capture_output=True,
                               text=True, timeout=30).stdout
        job_now = srv.request("GET", f"/api/v1/jobs/{job}", token=None).json
        raise AssertionError(f"{e}\njob: {job_now}\nsqueue:\n{squeue}\nsinfo:\n{sinfo}")
    return attempts_of(srv, job)[-1]["slurm_job_id"]


def test_slurms_warning_signal_preempts_and_requeues_on_a_new_allocation(server_factory, slurm):
    root, env = slurm
    srv = slurm_server(server_factory, root)
    # A checkpoint big enough to be still uploading when the attempt ends: the agents wait for it
    # and the server leaves their allocation to them until then (their nodes end with it; the new
    # one holds no copy to resume from).
    job, _ = submit_waiter(srv, "slurm-preempt", env={"BALLAST_MB": "512"})
    first = running_with_checkpoint(srv, job, env)
    # What Slurm sends before the time limit or at a preemption (--signal=USR1@60): the agents
    # ask the server to preempt; the workers (which ignore SIGUSR1) are stopped, the job restarts.
    r = subprocess.run(["scancel", "--signal=USR1", str(first)], env=env, capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    done = srv.wait_job(job, {"SUCCEEDED", "FAILED", "STOPPED"}, timeout=90)
    assert done["status"] == "SUCCEEDED", done
    assert done.get("preemptions") == 1, done
    a = attempts_of(srv, job)
    assert [x["status"] for x in a] == ["STOPPED", "SUCCEEDED"], a
    assert a[0]["end_reason"]["event"] == "preempted", a
    assert a[1]["slurm_job_id"] not in (None, first), a
    assert a[1]["resumed_from_checkpoint"] is not None, a
    # Both allocations end, and no agent outlives them.
    for sid in (first, a[1]["slurm_job_id"]):
        harness.wait_for(lambda: slurm_state(env, sid) in ("", "COMPLETED", "CANCELLED"), 30,
                         f"Slurm job {sid} ending")
        harness.wait_for(lambda: not agents_of(sid), 30, f"the agents of Slurm job {sid} exiting")


def test_slurmctld_restarted_mid_job_and_the_server_gone_leave_no_agent(server_factory, slurm):
    root, env = slurm
    srv = slurm_server(server_factory, root)
    job, work = submit_waiter(srv, "slurm-ctld")
    sid = running_with_checkpoint(srv, job, env)
    # slurmctld restarts (state recovered from its state directory); the job runs on.
    pidfile = os.path.join(root, "run", "slurmctld.pid")
    with open(pidfile) as f:
        os.kill(int(f.read()), signal.SIGTERM)
    harness.wait_for(lambda: subprocess.run(["scontrol", "ping"], env=env, capture_output=True,
                                            timeout=10).returncode != 0, 30, "slurmctld down")
    subprocess.run(["slurmctld", "-f", env["SLURM_CONF"]], env=env, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30, check=True)
    harness.wait_for(lambda: slurm_state(env, sid) == "RUNNING", 30, "slurmctld back")
    open(os.path.join(work, "go"), "w").close()
    done = srv.wait_job(job, {"SUCCEEDED", "FAILED", "STOPPED"}, timeout=60)
    assert done["status"] == "SUCCEEDED", done
    assert len(attempts_of(srv, job)) == 1
    # The CLI lists the attempt with its Slurm job id.
    out = harness.run_cli(srv, "attempts", str(job), token=None)
    assert out.returncode == 0 and str(sid) in out.stdout, out
    # A server that goes away (stopped here, never to return) leaves agents that exit by
    # themselves (--ephemeral 3 s), their allocation ending with them.
    job2, _ = submit_waiter(srv, "slurm-orphan")
    sid2 = running_with_checkpoint(srv, job2, env)
    assert agents_of(sid2)
    # The first node's agent runs in the batch script itself (no step to wait for); the
    # other node's in the srun step.
    first, second = agent_env(sid2, "n1"), agent_env(sid2, "n2")
    assert first is not None and "SLURM_STEP_ID" not in first, first
    assert second is not None and second.get("SLURM_STEP_ID") == "0", second
    # Their data directory is this cluster's, this allocation's and this submission's (Slurm
    # job ids recur across clusters: an earlier agent's spool under the same id must not be
    # replayed).
    dirs = glob.glob(f"/tmp/trainyard-slurm/{cluster_name(env)}/{sid2}-*/n1")
    assert len(dirs) == 1, dirs
    assert re.fullmatch(r"[0-9a-f]{16}", dirs[0].split("/")[-2].split("-")[1]), dirs
    assert srv.stop() == 0
    harness.wait_for(lambda: not agents_of(sid2), 30, "the orphaned agents exiting")
    harness.wait_for(lambda: slurm_state(env, sid2) in ("", "COMPLETED", "FAILED"), 30,
                     "the allocation ending with its agents")


def node_state(env, node):
    r = subprocess.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T"], env=env,
                       capture_output=True, text=True, timeout=30)
    return r.stdout.strip()


def test_a_node_lost_restarts_the_job_on_a_new_allocation(server_factory, slurm):
    root, env = slurm
    srv = slurm_server(server_factory, root)
    job, work = submit_waiter(srv, "slurm-node-lost",
                              run_config={"failure_config": {"max_failures": 1}})
    first = running_with_checkpoint(srv, job, env)
    # n2's slurmd dies (kill -9): Slurm finds the node not responding (SlurmdTimeout, short in
    # scripts/slurm-local.sh's cluster), sets it DOWN and ends the allocation (NODE_FAIL); its
    # step on n1 is killed, the attempt fails, and the job restarts on a new allocation once
    # n2 is back (ReturnToService=2: a restarted slurmd returns it to service).
    with open(os.path.join(root, "run", "slurmd-n2.pid")) as f:
        os.kill(int(f.read()), signal.SIGKILL)
    try:
        harness.wait_for(lambda: node_state(env, "n2").startswith("down"), 30, "n2 DOWN")
    finally:
        subprocess.run(["slurmd", "-f", env["SLURM_CONF"], "-N", "n2"], env=env,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=30, check=True)
    done = srv.wait_job(job, {"SUCCEEDED", "FAILED", "STOPPED"}, timeout=90)
    assert done["status"] == "SUCCEEDED", done
    a = attempts_of(srv, job)
    assert [x["status"] for x in a] == ["FAILED", "SUCCEEDED"], a
    assert a[1]["slurm_job_id"] not in (None, first), a
    harness.wait_for(lambda: node_state(env, "n2") in ("idle", "mixed", "allocated"), 30,
                     "n2 back in service")
    harness.wait_for(lambda: not agents_of(first), 30, "the lost allocation's agents exiting")
