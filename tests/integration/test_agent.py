"""trainyard-agent against a real server: registration, node identity, LOST detection,
reconnects, running workers (logs, exit codes, environment), stopping process groups, and the
report socket with its durable spool."""
import ctypes
import json
import os
import time

import pytest

import harness
from harness import Agent, processes_in_group, read_env_file

PYTHON = "/usr/bin/python3"


@pytest.fixture
def agent_factory():
    """Starts agents; at teardown each is sent SIGTERM and must exit 0."""
    made = []

    def make(server, args=(), data_dir=None, start=True):
        a = Agent(server, data_dir=data_dir, args=args)
        made.append(a)
        return a.start(wait=False) if start else a

    yield make
    for a in made:
        if a.proc is not None and a.proc.returncode is None:
            code = a.stop()
            assert code == 0, f"agent exited with {code}:\n{a.log_text()}"


@pytest.fixture
def agent(server, agent_factory):
    a = agent_factory(server, args=["--cpus", "4"])
    a.wait_node()
    return a


def run_job(server, spec, statuses=("SUCCEEDED", "FAILED"), timeout=60):
    job = server.submit(spec)
    return server.wait_job(job["id"], statuses, timeout=timeout)


def workers_of(server, job_id):
    r = server.request("GET", f"/api/v1/jobs/{job_id}/workers")
    assert r.status == 200, r
    return sorted(r.json["workers"], key=lambda w: w["rank"])


@pytest.fixture(scope="module")
def server(module_server_factory):
    """One server for the file's tests (conftest.py): each makes its own jobs."""
    return module_server_factory()


# ------------------------------------------------------------------------------------------------
# Registration and node identity
# ------------------------------------------------------------------------------------------------

def test_agent_registers_with_declared_resources(server, agent_factory):
    a = agent_factory(server, args=["--cpus", "6", "--memory-mb", "2048", "--gpus", "0,1,2,3",
                                    "--gpu-type", "H100", "--resources", '{"tpu": 2}',
                                    "--labels", "zone=a,pool=train"])
    node = a.wait_node()
    assert node["resources"]["CPU"] == 6
    assert node["resources"]["memory_mb"] == 2048
    assert node["resources"]["GPU"] == [0, 1, 2, 3]
    assert node["resources"]["tpu"] == 2
    assert node["gpu_type"] == "H100"
    assert node["labels"] == {"zone": "a", "pool": "train"}
    assert node["address"] == "127.0.0.1"


def _have_nvml():
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
        return True
    except OSError:
        return False


@pytest.mark.skipif(_have_nvml(), reason="this host has NVML: its GPUs are detected")
def test_agent_without_nvml_offers_no_gpu(server, agent_factory):
    a = agent_factory(server)
    node = a.wait_node()
    assert node["resources"].get("GPU", []) == []
    assert node["resources"]["CPU"] == os.cpu_count()


def test_node_id_is_stable_across_agent_restarts(server, agent_factory):
    before = {n["id"] for n in server.request("GET", "/api/v1/nodes").json["nodes"]}
    a = agent_factory(server)
    first = a.wait_node()["id"]
    assert a.stop() == 0
    b = agent_factory(server, data_dir=a.data_dir)
    assert b.wait_node()["id"] == first
    ids = [n["id"] for n in server.request("GET", "/api/v1/nodes").json["nodes"]]
    assert ids.count(first) == 1 and set(ids) <= before | {first}


def test_declared_node_id_is_used(server, agent_factory):
    a = agent_factory(server, args=["--node-id", "gpu-box-7"])
    assert a.wait_node()["id"] == "gpu-box-7"


def test_wrong_token_is_refused_and_retried(server, agent_factory):
    before = server.request("GET", "/api/v1/nodes").json["nodes"]
    a = agent_factory(server, args=["--token", "not-the-token"], start=False)
    a.start(token=None, wait=False)
    deadline = time.time() + 10
    while time.time() < deadline and "refused this agent" not in a.log_text():
        time.sleep(0.1)
    assert "refused this agent" in a.log_text(), a.log_text()
    assert a.proc.poll() is None  # keeps retrying with backoff
    assert len(server.request("GET", "/api/v1/nodes").json["nodes"]) == len(before)


def test_killed_agent_is_marked_lost(server_factory, agent_factory):
    server = server_factory(extra_args=["--heartbeat-timeout-s", "2"])
    a = agent_factory(server)
    a.wait_node()
    a.kill()
    node = a.wait_node(statuses=("LOST",), timeout=15)
    assert node["status"] == "LOST"


def test_agent_reconnects_after_server_restart(server_factory, agent_factory):
    server = server_factory()
    a = agent_factory(server)
    a.wait_node()
    job = server.submit({"entrypoint": "sleep 4; echo survived", "name": "through-restart"})
    server.wait_job(job["id"], ["RUNNING"], timeout=30)
    assert server.stop() == 0
    # Same ports, data dir and database: a restarted server.
    again = harness.Server.__new__(harness.Server)
    again.__dict__.update(server.__dict__)
    again.proc = None
    again.start()
    try:
        node = a.wait_node(timeout=30)
        assert node["id"] == a.node_id
        done = again.wait_job(job["id"], ["SUCCEEDED", "FAILED"], timeout=60)
        assert done["status"] == "SUCCEEDED", done
        assert "survived" in a.worker_log(job["id"], 0, attempt=done["attempt"])
    finally:
        assert a.stop() == 0, a.log_text()
        assert again.stop() == 0, again.log_text()


# ------------------------------------------------------------------------------------------------
# Workers
# ------------------------------------------------------------------------------------------------

def test_one_worker_job_succeeds_and_keeps_its_log(server, agent):
    job = run_job(server, {"entrypoint": ["/bin/sh", "-c", "echo hello; echo oops >&2; exit 0"]})
    assert job["status"] == "SUCCEEDED", job
    log = agent.worker_log(job["id"], 0, attempt=job["attempt"])
    assert "hello" in log and "oops" in log
    w = workers_of(server, job["id"])
    assert [x["exit_code"] for x in w] == [0]
    assert w[0]["node_id"] == agent.node_id


def test_failing_worker_fails_the_job(server, agent):
    job = run_job(server, {"entrypoint": "echo failing; exit 3"})
    assert job["status"] == "FAILED", job
    assert [w["exit_code"] for w in workers_of(server, job["id"])] == [3]


def test_missing_program_fails_the_job_with_the_reason(server, agent):
    job = run_job(server, {"entrypoint": ["/nonexistent/train"]})
    assert job["status"] == "FAILED", job
    assert [w["exit_code"] for w in workers_of(server, job["id"])] == [127]
    log = agent.worker_log(job["id"], 0, attempt=job["attempt"])
    assert "cannot execute /nonexistent/train" in log


def test_bad_working_dir_fails_the_job(server, agent):
    job = run_job(server, {"entrypoint": ["true"], "working_dir": "/nonexistent/dir"})
    assert job["status"] == "FAILED", job
    assert "cannot enter working_dir /nonexistent/dir" in agent.worker_log(
        job["id"], 0, attempt=job["attempt"])


def test_worker_runs_in_working_dir(server, agent, tmp_path):
    out = tmp_path / "pwd.out"
    job = run_job(server, {"entrypoint": f"pwd > {out}", "working_dir": str(tmp_path)})
    assert job["status"] == "SUCCEEDED", job
    assert out.read_text().strip() == str(tmp_path)


def test_program_is_looked_up_on_the_path_the_job_sets(server, agent, tmp_path):
    # The agent's own PATH does not have it: execvp in the worker's environment would find it.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    prog = bindir / "ty-test-on-job-path"
    prog.write_text("#!/bin/sh\necho found on the PATH of the job\n")
    prog.chmod(0o755)
    job = run_job(server, {"entrypoint": ["ty-test-on-job-path"],
                           "env": {"PATH": f"{bindir}:/usr/bin:/bin"}})
    assert job["status"] == "SUCCEEDED", job
    assert "found on the PATH of the job" in agent.worker_log(job["id"], 0, attempt=job["attempt"])


def test_program_missing_from_the_job_path_fails_with_the_reason(server, agent):
    job = run_job(server, {"entrypoint": ["ty-test-no-such-program"],
                           "env": {"PATH": "/nonexistent/bin"}})
    assert job["status"] == "FAILED", job
    assert [w["exit_code"] for w in workers_of(server, job["id"])] == [127]
    assert "cannot execute ty-test-no-such-program: No such file or directory" in \
        agent.worker_log(job["id"], 0, attempt=job["attempt"])


def test_script_without_interpreter_line_runs_with_sh(server, agent, tmp_path):
    # execvp runs a file the kernel cannot execute (no "#!") with /bin/sh; so does the agent.
    script = tmp_path / "plain-script"
    script.write_text('echo "run by sh with $1"\n')
    script.chmod(0o755)
    job = run_job(server, {"entrypoint": [str(script), "its argument"]})
    assert job["status"] == "SUCCEEDED", job
    assert "run by sh with its argument" in agent.worker_log(job["id"], 0, attempt=job["attempt"])


def test_agent_removes_shared_memory_segments_left_by_the_attempt(server, agent):
    # libtrainyard's rank 0 unlinks its allreduce segment once every rank mapped it; one killed
    # in between leaves it in /dev/shm. The worker plays that rank: it leaves a segment with its
    # attempt's name prefix. Another job's segment must survive.
    other = "/dev/shm/trainyard-not_this_job-1-00000000deadbeef"
    with open(other, "w") as f:
        f.write("x")
    try:
        leave = ("import os; e = os.environ; "
                 "open('/dev/shm/trainyard-%s-%s-00000000deadbeef' % "
                 "(e['TRAINYARD_JOB_ID'], e['TRAINYARD_ATTEMPT']), 'w').write('x')")
        job = run_job(server, {"entrypoint": [PYTHON, "-c", leave]})
        assert job["status"] == "SUCCEEDED", job
        left = f"/dev/shm/trainyard-{job['id']}-{job['attempt']}-00000000deadbeef"
        deadline = time.time() + 10
        while os.path.exists(left) and time.time() < deadline:
            time.sleep(0.05)
        assert not os.path.exists(left), agent.log_text()
        assert os.path.exists(other)
    finally:
        os.unlink(other)


def test_worker_gets_stdio_only_in_its_own_process_group(server, agent):
    job = server.submit({"entrypoint": ["/bin/sleep", "60"],
                         "scaling_config": {"num_workers": 2}})
    server.wait_job(job["id"], ["RUNNING"], timeout=30)
    log_dir = os.path.join(os.path.realpath(agent.data_dir), "logs", str(job["id"]), "1")
    for w in workers_of(server, job["id"]):
        pid = w["pid"]
        log = os.path.join(log_dir, f"rank-{w['rank']}.log")
        err = os.path.join(log_dir, f"rank-{w['rank']}.err.log")
        fds = {fd: os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
        assert fds == {"0": "/dev/null", "1": log, "2": err}, fds
        # Its own process group, but the agent's session (no scheduler autogroup per worker).
        assert os.getpgid(pid) == pid
        assert os.getsid(pid) == os.getsid(agent.proc.pid)
    r = server.request("POST", f"/api/v1/jobs/{job['id']}/stop")
    assert r.status in (200, 202), r
    assert server.wait_job(job["id"], ["STOPPED"], timeout=30)["status"] == "STOPPED"


def test_stop_kills_every_process_of_the_job(server_factory, agent_factory, tmp_path):
    server = server_factory(extra_args=["--stop-grace-s", "1"])
    a = agent_factory(server)
    a.wait_node()
    ready = tmp_path / "ready"
    # The shell ignores SIGTERM; one child sleeps in the background, one grandchild is
    # orphaned by its subshell: only a process-group SIGKILL takes them all.
    script = (f"trap '' TERM; sleep 1000 & (sleep 1000 &); echo started > {ready}; "
              "while true; do sleep 1; done")
    job = server.submit({"entrypoint": script})
    server.wait_job(job["id"], ["RUNNING"], timeout=30)
    deadline = time.time() + 10
    while not ready.exists() and time.time() < deadline:
        time.sleep(0.05)
    pgid = workers_of(server, job["id"])[0]["pid"]
    assert len(processes_in_group(pgid)) >= 3
    r = server.request("POST", f"/api/v1/jobs/{job['id']}/stop")
    assert r.status in (200, 202), r
    done = server.wait_job(job["id"], ["STOPPED", "FAILED"], timeout=30)
    assert done["status"] == "STOPPED", done
    deadline = time.time() + 5
    while processes_in_group(pgid) and time.time() < deadline:
        time.sleep(0.05)
    assert processes_in_group(pgid) == []


def test_worker_environment_has_the_design_variables(server, agent, tmp_path):
    out = tmp_path / "env.out"
    job = run_job(server, {"entrypoint": f"env > {out}", "env": {"FOO": "bar"},
                           "train_loop_config": {"lr": 0.5, "layers": [1, 2]}})
    assert job["status"] == "SUCCEEDED", job
    env = read_env_file(out)
    assert env["RANK"] == "0"
    assert env["WORLD_SIZE"] == "1"
    assert env["LOCAL_RANK"] == "0"
    assert env["LOCAL_WORLD_SIZE"] == "1"
    assert env["NODE_RANK"] == "0"
    assert env["MASTER_ADDR"] == "127.0.0.1"
    # The first job on a node gets the lowest port of the node's range.
    assert int(env["MASTER_PORT"]) == int(agent.port_range.split("-")[0])
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    assert "TF_CONFIG" not in env
    assert env["TRAINYARD_JOB_ID"] == str(job["id"])
    assert env["TRAINYARD_ATTEMPT"] == str(job["attempt"])
    assert json.loads(env["TRAINYARD_CONFIG"]) == {"lr": 0.5, "layers": [1, 2]}
    assert env["TRAINYARD_CHECKPOINT_DIR"] == ""
    assert env["TRAINYARD_REPORT_SOCKET"] == os.path.join(os.path.realpath(agent.data_dir),
                                                          "report.sock")
    assert env["TRAINYARD_BACKEND"] == "torch"
    assert env["PYTHONPATH"].split(":")[0] == os.path.join(
        os.path.realpath(harness.SOURCE_DIR), "worker", "python")
    assert env["FOO"] == "bar"


def test_gpu_workers_see_only_their_gpus(server, agent_factory, tmp_path):
    a = agent_factory(server, args=["--cpus", "4", "--gpus", "0,1", "--gpu-type", "H100"])
    a.wait_node()
    job = run_job(server, {"entrypoint": f"env > {tmp_path}/env.$RANK",
                           "scaling_config": {"num_workers": 2, "use_gpu": True}})
    assert job["status"] == "SUCCEEDED", job
    seen = {}
    for rank in (0, 1):
        env = read_env_file(tmp_path / f"env.{rank}")
        assert env["WORLD_SIZE"] == "2" and env["LOCAL_WORLD_SIZE"] == "2"
        assert env["LOCAL_RANK"] == str(rank)
        seen[rank] = env["CUDA_VISIBLE_DEVICES"]
    assert sorted(seen.values()) == ["0", "1"]


def test_tensorflow_workers_get_tf_config(server, agent, tmp_path):
    job = run_job(server, {"entrypoint": f"env > {tmp_path}/env.$RANK", "backend": "tensorflow",
                           "scaling_config": {"num_workers": 2}})
    assert job["status"] == "SUCCEEDED", job
    port = None
    for rank in (0, 1):
        env = read_env_file(tmp_path / f"env.{rank}")
        tf = json.loads(env["TF_CONFIG"])
        assert tf["task"] == {"type": "worker", "index": rank}
        port = int(env["MASTER_PORT"])
        assert tf["cluster"]["worker"] == [f"127.0.0.1:{port}", f"127.0.0.1:{port + 1}"]


def test_agent_shutdown_stops_its_workers(server, agent_factory, tmp_path):
    a = agent_factory(server, args=["--stop-grace-s", "1"])
    a.wait_node()
    job = server.submit({"entrypoint": "trap '' TERM; sleep 1000 & wait"})
    server.wait_job(job["id"], ["RUNNING"], timeout=30)
    pgid = workers_of(server, job["id"])[0]["pid"]
    assert processes_in_group(pgid)
    assert a.stop() == 0, a.log_text()
    assert processes_in_group(pgid) == []


# ------------------------------------------------------------------------------------------------
# Reports (phase 2: report socket, spool)
# ------------------------------------------------------------------------------------------------

REPORTING = """
import trainyard
for step in range(3):
    trainyard.report({"loss": 1.0 / (step + 1), "step": step})
print("reported")
"""


def test_reports_reach_the_server_and_leave_the_spool(server, agent):
    job = run_job(server, {"entrypoint": [PYTHON, "-c", REPORTING]})
    log = agent.worker_log(job["id"], 0, attempt=job["attempt"])
    assert job["status"] == "SUCCEEDED", (job, log)
    assert "reported" in log
    deadline = time.time() + 10
    metrics = None
    while time.time() < deadline:
        metrics = server.request("GET", f"/api/v1/jobs/{job['id']}").json["result"]["metrics"]
        if metrics and metrics.get("loss") == pytest.approx(1 / 3):
            break
        time.sleep(0.1)
    assert metrics and metrics.get("loss") == pytest.approx(1 / 3), (metrics, server.log_text())
    spool = os.path.join(agent.data_dir, "spool")
    while os.listdir(spool) and time.time() < deadline:
        time.sleep(0.05)
    assert os.listdir(spool) == []


def test_spooled_reports_survive_an_agent_restart(server, agent_factory):
    a = agent_factory(server)
    a.wait_node()
    # A report spooled by an earlier agent process that never got it acked.
    job = run_job(server, {"entrypoint": "sleep 0.2"})
    spool = os.path.join(a.data_dir, "spool")
    body = {"job_id": str(job["id"]), "attempt": job["attempt"], "rank": 0, "report_seq": 1,
            "metrics": {"accuracy": 0.75}, "step": 5, "time": "2024-01-01T00:00:00.000Z",
            "checkpoint_dir": None}
    assert a.stop() == 0
    with open(os.path.join(spool, f"{job['id']}.{job['attempt']}.0.1.json"), "w") as f:
        json.dump(body, f)
    b = agent_factory(server, data_dir=a.data_dir)
    b.wait_node()
    deadline = time.time() + 15
    while os.listdir(spool) and time.time() < deadline:
        time.sleep(0.05)
    assert os.listdir(spool) == [], b.log_text()
    assert "resending 1 spooled report" in b.log_text()


def test_report_socket_refuses_unknown_workers(agent):
    import socket
    import struct
    s = socket.socket(socket.AF_UNIX)
    s.connect(os.path.join(agent.data_dir, "report.sock"))
    hello = json.dumps({"type": "hello", "job_id": "nope", "attempt": 0, "rank": 0,
                        "pid": os.getpid()}).encode()
    s.sendall(struct.pack(">I", len(hello)) + hello)
    s.settimeout(5)
    head = s.recv(4)
    (n,) = struct.unpack(">I", head)
    msg = json.loads(s.recv(n))
    assert msg["type"] == "error" and msg["seq"] == 0
    assert s.recv(1) == b""  # and the agent closed the connection
    s.close()
