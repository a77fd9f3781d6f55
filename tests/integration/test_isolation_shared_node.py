"""Two root agents on one node whose --worker-uids overlap (as every test agent's did when they all
had the default range): a uid that a process of this node still runs under is not given to a
job, so one agent's job never shares a uid with the other's, and the end of one job (the agent
kills every process left under its uid) cannot kill the other's workers."""
import os

import pytest

import harness

SERVER_ARGS = ("--heartbeat-timeout-s", "120")


def proc_uid(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Uid:"):
                return int(line.split()[1])
    raise AssertionError(f"no Uid line for pid {pid}")


def proc_state(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("State:"):
                    return line.split()[1]
    except FileNotFoundError:
        return "gone"
    return "?"


def test_agents_sharing_a_uid_range_never_share_a_uid(server_factory, agent_factory):
    if os.geteuid() != 0:
        assert not os.environ.get("CI"), "CI must run the suite as root"
        pytest.skip("per-job uids need an agent running as root")
    server = server_factory(extra_args=SERVER_ARGS)
    uids = harness.worker_uids("shared by two agents")
    env = {"TRAINYARD_AGENT_RUN_AS": "auto", "TRAINYARD_AGENT_WORKER_UIDS": uids}
    agent_factory(srv=server, cpus=1, env=env)
    agent_factory(srv=server, cpus=1, env=env)
    jobs, pids = [], []
    for name in ("first", "second"):
        job = server.submit({"name": name, "entrypoint": "sleep 600", "working_dir": "/tmp"})["id"]
        server.wait_job(job, {"RUNNING"})
        [w] = server.request("GET", f"/api/v1/jobs/{job}/workers").json["workers"]
        jobs.append(job)
        pids.append(w["pid"])
    first, second = (proc_uid(p) for p in pids)
    lo = int(uids.split("-")[0])
    assert first == lo and second != first, (first, second)
    # The end of the second job frees its uid (every process of it killed): the first runs on.
    server.request("POST", f"/api/v1/jobs/{jobs[1]}/stop")
    server.wait_job(jobs[1], {"STOPPED"})
    assert proc_state(pids[0]) not in ("gone", "Z"), proc_state(pids[0])
    assert server.request("GET", f"/api/v1/jobs/{jobs[0]}").json["status"] == "RUNNING"
    server.request("POST", f"/api/v1/jobs/{jobs[0]}/stop")
    server.wait_job(jobs[0], {"STOPPED"})


def test_a_supervisor_that_dies_before_starting_its_worker_is_reported_as_such(server,
                                                                              agent_factory):
    """A worker's supervisor that ends before it starts the worker (killed, or exiting) is
    reported with its own exit status or signal, not as 'cannot execute ...: No child
    processes' (the errno of the short read on its start pipe)."""
    if os.geteuid() != 0:
        assert not os.environ.get("CI"), "CI must run the suite as root"
        pytest.skip("per-job uids need an agent running as root")
    agent = agent_factory(env={"TRAINYARD_AGENT_RUN_AS": "auto"})
    # With uids of their own, workers' supervisors run from the agent's copy in <data>/bin.
    sup = os.path.join(agent.data_dir, "bin", "trainyard-supervisor")
    for body, how in (("kill -9 $$", "killed by signal 9"), ("exit 3", "exit status 3")):
        with open(sup + ".new", "w") as f:
            f.write(f"#!/bin/sh\n{body}\n")
        os.chmod(sup + ".new", 0o755)
        os.replace(sup + ".new", sup)
        job = server.submit({"entrypoint": "true", "working_dir": "/tmp"})["id"]
        done = server.wait_job(job, {"SUCCEEDED", "FAILED"})
        assert done["status"] == "FAILED", done
        assert done["status_message"] == ("worker rank 0 did not start: its supervisor exited "
                                          f"before starting it ({how})"), done
