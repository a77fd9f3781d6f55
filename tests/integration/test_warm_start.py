"""Issue 27 point 1, warm starts: an agent with --warm-python keeps interpreters started (as the
next job's uid, in cgroups of their own) and hands one a Python worker at launch. The worker must
see exactly what a cold one sees (uid, environment, working directory, TMPDIR), and the isolation
attacks of issue 22 must fail through it as they do cold. One agent (workers under uids of their
own, --run-as auto) serves both checks; bare interpreters (--warm-frameworks none) keep it fast."""
import json
import os

import harness
from test_isolation_procs import PY, THIEF, log_of, wait_line

wait_for = harness.wait_for

# The worker's view of itself, and whether it runs in a warm interpreter: the agent's STUB is on
# a warm interpreter's command line.
SELF = """
import json, os, sys, tempfile
warm = "_trainyard_warm" in open("/proc/self/cmdline").read()
st = os.stat(os.environ["TMPDIR"])
print("SELF " + json.dumps({
    "warm": warm, "uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
    "cwd": os.getcwd(), "argv": sys.argv, "foo": os.environ.get("FOO"),
    "user": os.environ.get("USER"), "home": os.environ.get("HOME"),
    "tmpdir": os.environ["TMPDIR"], "tmp_owner": st.st_uid, "gettempdir": tempfile.gettempdir(),
    "job": os.environ.get("TRAINYARD_JOB_ID"), "rank": os.environ.get("RANK"),
    "main": __name__, "stdin": os.readlink("/proc/self/fd/0")}), flush=True)
"""


def warm_ready(agent):
    """Waits for the pool: two interpreters' logs in <data>/warm."""
    d = os.path.join(agent.data_dir, "warm")
    wait_for(lambda: os.path.isdir(d) and len(os.listdir(d)) >= 2, what="two warm interpreters")


def test_a_warm_worker_runs_as_a_cold_one_would_and_an_isolation_attack_fails_through_it(
        server, agent_factory):
    agent = agent_factory(env={"TRAINYARD_AGENT_RUN_AS": "auto"},
                          extra_args=["--warm-python", "2", "--warm-frameworks", "none",
                                      "--warm-python-exe", PY])
    agent.wait_node()
    warm_ready(agent)
    job = server.submit({"name": "warm", "entrypoint": [PY, "-c", SELF, "a1", "a2"],
                         "working_dir": "/tmp", "env": {"FOO": "bar"}})["id"]
    done = server.wait_job(job, {"SUCCEEDED", "FAILED"})
    me = json.loads(wait_line(agent, job, "SELF "))
    assert done["status"] == "SUCCEEDED", log_of(agent, job)
    assert me["warm"], me
    uid = me["uid"]
    assert uid >= 2000000000 and me["gid"] == uid and me["groups"] == [], me
    assert me["user"] == f"trainyard-{uid}" and me["home"] == me["tmpdir"], me
    assert me["tmp_owner"] == uid and me["gettempdir"] == me["tmpdir"], me
    assert me["cwd"] == "/tmp" and me["argv"] == ["-c", "a1", "a2"], me
    assert me["foo"] == "bar" and me["job"] == str(job) and me["rank"] == "0", me
    assert me["main"] == "__main__" and me["stdin"] == "/dev/null", me

    # Issue 22's attack on the supervisor's descriptors (test_isolation_procs), through a warm
    # worker: it takes them (the socket pair its interpreter waited on among them), but none
    # lets it write the agent lease.
    lease = os.path.join(agent.data_dir, "agent.lease")
    before = open(lease).read()
    warm_ready(agent)
    code = THIEF.replace("import ctypes, json, os",
                         "import ctypes, json, os\n"
                         "print('WARM', '_trainyard_warm' in open('/proc/self/cmdline').read(),"
                         " flush=True)")
    job = server.submit({"name": "thief", "entrypoint": [PY, "-c", code],
                         "working_dir": "/tmp"})["id"]
    done = server.wait_job(job, {"SUCCEEDED", "FAILED"})
    got = json.loads(wait_line(agent, job, "RESULT "))
    assert done["status"] == "SUCCEEDED", log_of(agent, job)
    assert wait_line(agent, job, "WARM ") == "True", log_of(agent, job)
    assert got["pidfd"] >= 0 and got["taken"], got
    assert got["written"] == [], got
    assert open(lease).read() == before
