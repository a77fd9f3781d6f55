"""A failure says what failed (issue 23, point 5): the agent finds the line of a failed worker's
output that says why (the exception ending a Python traceback, a failed assertion...) and sends
it with the worker's exit; a signal is named. The job's error carries both, with the rank, in the
API and in the CLI (`trainyard get`, `trainyard wait`). Real server, agent and workers."""
import textwrap

import harness

PY = "/usr/bin/python3"

# Rank 1 raises after some ordinary output; rank 0 succeeds.
RAISES = textwrap.dedent("""
    import os
    print("step 1 loss=0.5", flush=True)
    if os.environ["RANK"] == "1":
        lr = 3.0
        raise ValueError(f"bad lr {lr}")
""")

SEGFAULTS = textwrap.dedent("""
    import os, signal
    print("about to crash", flush=True)
    os.kill(os.getpid(), signal.SIGSEGV)
""")


def submit(srv, name, script, workers):
    return srv.submit({"name": name, "entrypoint": [PY, "-c", script], "working_dir": "/tmp",
                       "scaling_config": {"num_workers": workers,
                                          "resources_per_worker": {"CPU": 1}},
                       "run_config": {"failure_config": {"max_failures": 0}}})["id"]


def test_a_failed_job_says_which_rank_failed_and_why(server, agent_factory):
    agent_factory(cpus=3)
    raises = submit(server, "raises", RAISES, 2)
    segv = submit(server, "segv", SEGFAULTS, 1)

    done = server.wait_job(raises, {"FAILED", "SUCCEEDED"})
    assert done["status"] == "FAILED", done
    assert done["result"]["error"] == "worker rank 1 exited with code 1: ValueError: bad lr 3.0", done
    # Said once: the final status message is the error itself.
    assert done["status_message"] == done["result"]["error"], done

    done = server.wait_job(segv, {"FAILED", "SUCCEEDED"})
    assert done["status"] == "FAILED", done
    assert done["result"]["error"] == "worker rank 0 was killed by SIGSEGV", done
    attempt = server.request("GET", f"/api/v1/jobs/{segv}/attempts").json["attempts"][0]
    assert attempt["end_reason"]["signal"] == 11, attempt

    st = harness.run_cli(server, "get", str(raises))
    assert st.returncode == 0, st
    assert "worker rank 1 exited with code 1: ValueError: bad lr 3.0" in st.stdout, st
    w = harness.run_cli(server, "wait", str(segv))
    assert w.returncode != 0, w
    assert "worker rank 0 was killed by SIGSEGV" in w.stderr, w
