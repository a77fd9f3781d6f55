"""Issue 22, the agent's side of keeping jobs apart: every worker in a cgroup of its own (limits,
clean-up, out-of-memory report), uids reserved host-wide across agents (finding 3), nothing
writable to the agent in a supervisor (finding 2), every child reaped (finding 5), the job's
files in /tmp, /var/tmp and /dev/shm removed at its end (finding 14), TMPDIR opened without
following links (finding 15). Each is an attack a hostile job could make; the agents run as root
here, with workers under uids of their own (--run-as auto) where the test needs it."""
import json
import os
import subprocess
import textwrap
import time
import uuid

import pytest

import harness


PY = "/usr/bin/python3"


wait_for = harness.wait_for


def isolated_agent(agent_factory, srv=None, extra_args=(), **kw):
    return agent_factory(srv=srv, env={"TRAINYARD_AGENT_RUN_AS": "auto"},
                         extra_args=list(extra_args), **kw)


def log_of(agent, job, rank=0):
    try:
        return agent.worker_log(job, rank)
    except OSError:
        return ""


def wait_line(agent, job, prefix, rank=0):
    """The first whole line of the rank's log starting with prefix (without it), once there.

    Workers run with PYTHONUNBUFFERED, so print() writes a line in pieces: the text after the
    last newline may be a line half written, and is not read."""
    def find():
        for line in log_of(agent, job, rank).split("\n")[:-1]:
            if line.startswith(prefix):
                return [line[len(prefix):]]
        return None
    return wait_for(find, what=f"'{prefix}' in job {job}'s log")[0]


def worker_pid(server, job):
    [w] = server.request("GET", f"/api/v1/jobs/{job}/workers").json["workers"]
    return w["pid"]


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def cgroup_paths(pid):
    """{controller: path} of /proc/PID/cgroup."""
    out = {}
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, ctls, path = line.rstrip("\n").split(":", 2)
            for c in (ctls.split(",") if ctls else [""]):
                out[c] = path
    return out


def cgroup_dir(controller, path):
    """The directory of a cgroup path in the hierarchy of controller ("" for v2)."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.split(" - ", 1)
            fstype, _, opts = right.split()[:3]
            mnt = left.split()[4]
            if controller == "" and fstype == "cgroup2":
                return mnt + path
            if fstype == "cgroup" and controller in opts.split(","):
                return mnt + path
    return None


# ---- every worker in a cgroup of its own --------------------------------------------------

DAEMON = textwrap.dedent("""
    import os, sys, time
    # A daemon that leaves the worker's process group and session: only its cgroup still holds
    # it.
    pid = os.fork()
    if pid == 0:
        os.setsid()
        os.execvp("sleep", ["sleep", "1000"])
    print("DAEMON", pid, flush=True)
    print("CGROUP", open("/proc/self/cgroup").read().replace("\\n", "|"), flush=True)
    time.sleep(1000)
""")


def require_cgroups(agent):
    """Not Run (a skip) on a host where the agent can create no cgroups: it says so at start."""
    agent.wait_node()
    if "NO CGROUPS" in agent.log_text():
        pytest.skip("this host lets the agent create no cgroups (its log says NO CGROUPS)")


@pytest.fixture(scope="module")
def server(module_server_factory):
    """One server for the file's tests (conftest.py): each makes its own jobs."""
    return module_server_factory()


def test_a_worker_runs_in_a_cgroup_of_its_own_which_takes_its_daemons_with_it(server,
                                                                               agent_factory):
    agent = agent_factory()
    require_cgroups(agent)
    job = server.submit({"name": "daemon", "entrypoint": [PY, "-c", DAEMON],
                         "working_dir": "/tmp"})["id"]
    server.wait_job(job, {"RUNNING"})
    daemon = int(wait_line(agent, job, "DAEMON "))
    wait_line(agent, job, "CGROUP ")
    agent_pid = agent.proc.pid
    paths = cgroup_paths(daemon)
    # The daemon is in the worker's cgroup, under this agent's own parent, in every hierarchy
    # the agent uses (memory, cpu and pids: v2's one, or v1's).
    mem = paths.get("memory", paths.get(""))
    assert f"-{agent_pid}/{job}.1.0" in mem, paths
    assert f"-{agent_pid}/{job}.1.0" in paths.get("pids", paths.get("")), paths
    leaf = cgroup_dir("memory" if "memory" in paths else "", mem)
    assert os.path.isdir(leaf)
    text = agent.log_text()
    assert "each worker runs in" in text and "cgroup" in text, text
    pids_dir = cgroup_dir("pids" if "pids" in paths else "", paths.get("pids", paths.get("")))
    with open(os.path.join(pids_dir, "pids.max")) as f:
        assert f.read().strip() == "4096"
    server.request("POST", f"/api/v1/jobs/{job}/stop")
    server.wait_job(job, {"STOPPED"})
    # The daemon went with the worker, and so did the cgroup.
    wait_for(lambda: not pid_alive(daemon), what="the daemon killed")
    wait_for(lambda: not os.path.exists(leaf), what="the worker's cgroup removed")
    # Its use, read from its cgroups, is in the agent's line about its end.
    assert f"job {job} attempt 1 rank 0" in text_after(agent, "s of CPU")
    parent = os.path.dirname(leaf)
    assert agent.stop() == 0
    assert not os.path.exists(parent), "the agent's parent cgroup outlived it"


def text_after(agent, needle):
    """The agent log's lines holding needle, once there is one."""
    return wait_for(lambda: "\n".join(ln for ln in agent.log_text().splitlines() if needle in ln),
                    what=f"'{needle}' in the agent log")


HOG = textwrap.dedent("""
    import time
    print("hogging", flush=True)
    chunks = []
    while True:
        chunks.append(bytearray(16 << 20))
        for i in range(0, len(chunks[-1]), 4096):
            chunks[-1][i] = 1
""")


def test_a_worker_over_its_memory_limit_fails_the_job_naming_the_oom_killer(server,
                                                                           agent_factory):
    require_cgroups(agent_factory())
    job = server.submit({"name": "hog", "entrypoint": [PY, "-c", HOG], "working_dir": "/tmp",
                         "scaling_config": {"num_workers": 1,
                                            "resources_per_worker": {"CPU": 1,
                                                                     "memory_mb": 96}},
                         "run_config": {"failure_config": {"max_failures": 0}}})["id"]
    done = server.wait_job(job, {"FAILED", "SUCCEEDED"})
    assert done["status"] == "FAILED", done
    assert ("worker rank 0 was killed by the out-of-memory killer (memory limit 96 MiB)"
            in done["result"]["error"]), done


# ---- finding 3: a uid is one job's on the whole host ---------------------------------------

SLEEPER = textwrap.dedent("""
    import os, time
    print("UID", os.getuid(), flush=True)
    time.sleep(1000)
""")


def test_two_agents_on_one_host_never_give_one_uid_to_two_jobs(server, agent_factory):
    # Two agents on one host (as two nodes of a cluster, or two test clusters, are): one with
    # the default uid range, the other with an overlapping one. One CPU each: Alice's job takes
    # the first, Bob's the second.
    a = isolated_agent(agent_factory, cpus=1)
    alice = server.submit({"name": "alice", "entrypoint": [PY, "-c", SLEEPER],
                           "working_dir": "/tmp"})["id"]
    server.wait_job(alice, {"RUNNING"})
    alice_uid = int(wait_line(a, alice, "UID "))
    b = isolated_agent(agent_factory, cpus=1,
                       extra_args=["--worker-uids", "2000000000-2000000099"])
    bob = server.submit({"name": "bob", "entrypoint": [PY, "-c", SLEEPER],
                         "working_dir": "/tmp"})["id"]
    server.wait_job(bob, {"RUNNING"})
    bob_uid = int(wait_line(b, bob, "UID "))
    assert alice_uid != bob_uid and 0 not in (alice_uid, bob_uid)
    bob_pid = worker_pid(server, bob)
    # Alice's job ends: nothing of Bob's may go with it.
    server.request("POST", f"/api/v1/jobs/{alice}/stop")
    server.wait_job(alice, {"STOPPED"})
    lock = f"/run/trainyard/uid-{alice_uid}.lock"
    assert os.path.exists(lock)
    st = os.stat("/run/trainyard")
    assert st.st_uid == 0 and st.st_mode & 0o022 == 0
    assert os.stat(lock).st_mode & 0o777 == 0o600
    # Alice's uid is given back once nothing of it is left: then another job may take it.
    wait_for(lambda: flock_free(lock), what="alice's uid given back")
    assert pid_alive(bob_pid)
    assert server.request("GET", f"/api/v1/jobs/{bob}").json["status"] == "RUNNING"
    server.request("POST", f"/api/v1/jobs/{bob}/stop")
    server.wait_job(bob, {"STOPPED"})


def flock_free(path):
    import fcntl
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


# ---- finding 2: nothing in a supervisor writes to the agent --------------------------------

THIEF = textwrap.dedent("""
    import ctypes, json, os
    libc = ctypes.CDLL(None, use_errno=True)
    SYS_pidfd_open, SYS_pidfd_getfd = 434, 438
    sup = os.getppid()  # the supervisor: the same uid as this worker
    pidfd = libc.syscall(SYS_pidfd_open, sup, 0)
    out = {"pidfd": pidfd, "taken": [], "written": []}
    for fd in range(0, 64):
        got = libc.syscall(SYS_pidfd_getfd, pidfd, fd, 0)
        if got < 0:
            continue
        out["taken"].append(fd)
        target = os.readlink(f"/proc/self/fd/{got}")
        try:
            if "agent.lease" in target:
                os.pwrite(got, b"1 1 1" + b" " * 58 + b"\\n", 0)
                out["written"].append(target)
        except OSError:
            pass
        os.close(got)
    print("RESULT " + json.dumps(out), flush=True)
""")


def test_a_worker_that_takes_its_supervisors_descriptors_cannot_write_the_agent_lease(
        server, agent_factory):
    agent = isolated_agent(agent_factory)
    lease = os.path.join(agent.data_dir, "agent.lease")
    before = open(lease).read()
    job = server.submit({"name": "thief", "entrypoint": [PY, "-c", THIEF],
                         "working_dir": "/tmp"})["id"]
    done = server.wait_job(job, {"SUCCEEDED", "FAILED"})
    got = json.loads(wait_line(agent, job, "RESULT "))
    assert done["status"] == "SUCCEEDED", log_of(agent, job)
    # The attack itself worked: the worker took its supervisor's descriptors (the lease among
    # them), but none of them let it write.
    assert got["pidfd"] >= 0 and got["taken"], got
    assert got["written"] == [], got
    assert open(lease).read() == before


# ---- finding 5: every child reaped ---------------------------------------------------------

ORPHANS = textwrap.dedent("""
    import os, time
    for i in range(200):
        pid = os.fork()
        if pid == 0:
            if os.fork() == 0:  # the grandchild: an orphan once its parent is gone
                time.sleep(0.05)
                os._exit(0)
            os._exit(0)
        os.waitpid(pid, 0)
    time.sleep(0.5)
    print("forked", flush=True)
""")


def zombie_children(pid):
    out = subprocess.run(["ps", "--ppid", str(pid), "-o", "pid=,stat="], text=True,
                         stdout=subprocess.PIPE).stdout
    return [ln for ln in out.splitlines() if ln.split()[1].startswith("Z")]


def test_orphans_of_a_job_leave_no_zombies_behind(server, agent_factory):
    agent = agent_factory()
    job = server.submit({"name": "orphans", "entrypoint": [PY, "-c", ORPHANS],
                         "working_dir": "/tmp"})["id"]
    done = server.wait_job(job, {"SUCCEEDED", "FAILED"})
    assert done["status"] == "SUCCEEDED", log_of(agent, job)
    assert "forked" in log_of(agent, job)
    wait_for(lambda: not zombie_children(agent.proc.pid), timeout=30,
             what="no zombie children of the agent")


# ---- finding 14: the job's files in /tmp, /var/tmp and /dev/shm go with it -----------------

LITTER = textwrap.dedent("""
    import os, sys, time
    tag = sys.argv[1]
    for d in ("/tmp", "/var/tmp", "/dev/shm"):
        with open(os.path.join(d, tag + "-file"), "w") as f:
            f.write("left behind")
        os.makedirs(os.path.join(d, tag + "-dir", "deep"))
        with open(os.path.join(d, tag + "-dir", "deep", "x"), "w") as f:
            f.write("left behind")
        os.symlink("/etc/hostname", os.path.join(d, tag + "-link"))
    print("littered", flush=True)
""")


def test_a_jobs_files_in_tmp_var_tmp_and_dev_shm_are_removed_at_its_end(server, agent_factory):
    agent = isolated_agent(agent_factory)
    tag = f"ty-litter-{uuid.uuid4().hex[:12]}"
    # A file of someone else's beside them stays.
    other = f"/var/tmp/{tag}-root"
    with open(other, "w") as f:
        f.write("mine")
    try:
        job = server.submit({"name": "litter", "entrypoint": [PY, "-c", LITTER, tag],
                             "working_dir": "/tmp"})["id"]
        done = server.wait_job(job, {"SUCCEEDED", "FAILED"})
        assert done["status"] == "SUCCEEDED", log_of(agent, job)
        left = [os.path.join(d, tag + s) for d in ("/tmp", "/var/tmp", "/dev/shm")
                for s in ("-file", "-dir", "-link")]
        wait_for(lambda: not any(os.path.lexists(p) for p in left), timeout=30,
                 what="the job's files removed")
        assert os.path.exists("/etc/hostname")
        assert open(other).read() == "mine"
    finally:
        os.unlink(other)


# ---- finding 15: TMPDIR opened without following links --------------------------------------

SWAP = textwrap.dedent("""
    import os, sys, time
    tmp = os.environ["TMPDIR"]
    os.rename(tmp, tmp + ".moved")
    os.symlink(sys.argv[1], tmp)
    print("swapped", flush=True)
    time.sleep(1000)
""")


def test_a_tmpdir_replaced_by_a_link_does_not_make_root_write_elsewhere(server, agent_factory,
                                                                        tmp_path):
    agent = isolated_agent(agent_factory)
    target = tmp_path / "root-only"
    target.mkdir(mode=0o755)
    (target / "keep").write_text("keep")
    job = server.submit({"name": "swap", "entrypoint": [PY, "-c", SWAP, str(target)],
                         "working_dir": "/tmp"})["id"]
    server.wait_job(job, {"RUNNING"})
    wait_line(agent, job, "swapped")
    tmp = worker_tmp(server, job)
    # Stopping asks the worker to checkpoint: the agent creates the request file in TMPDIR.
    server.request("POST", f"/api/v1/jobs/{job}/stop")
    server.wait_job(job, {"STOPPED"})
    wait_for(lambda: not os.path.lexists(tmp) and not os.path.lexists(tmp + ".moved"),
             what="the job's TMPDIR removed")
    assert sorted(os.listdir(target)) == ["keep"], os.listdir(target)
    assert (target / "keep").read_text() == "keep"
    assert "TMPDIR" in agent.log_text() and "replaced" in agent.log_text()


def worker_tmp(server, job):
    pid = worker_pid(server, job)
    with open(f"/proc/{pid}/environ", "rb") as f:
        env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
    return env[b"TMPDIR"].decode()
