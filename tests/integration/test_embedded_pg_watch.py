"""The server watches its embedded PostgreSQL: a postmaster killed mid-job is restarted (crash
recovery) and the job finishes with everything it reported; one that cannot be restarted makes
the server exit non-zero with one line naming why, so that a supervisor acts."""
import os
import signal

import harness
from test_agent_restart import REPORTS, expected, submit, wait_files, worker_lines


def postmaster_pid(data):
    with open(os.path.join(data, "postgres", "postmaster.pid")) as f:
        return int(f.readline())


def full_log(server):
    with open(server.log_path, errors="replace") as f:
        return f.read()


def healthy(server):
    try:
        return harness.http("GET", server.url + "/api/v1/health", timeout=5).status == 200
    except OSError:
        return False


def test_killed_postmaster_is_restarted_and_the_job_loses_nothing(agent_factory):
    data = os.path.join(harness.make_tmpdir("ty-pgwatch-"), "d")
    server = harness.Server(data_dir=data, extra_args=["--pg-restart-attempts", "2"]).start()
    try:
        agent_factory(server, cpus=4)
        job, work = submit(server)
        wait_files([os.path.join(work, f"at-gate-{r}") for r in (0, 1)])
        first = postmaster_pid(data)
        os.kill(first, signal.SIGKILL)
        harness.wait_for(lambda: "restarting it" in full_log(server), what="the restart line")
        # The workers carry on meanwhile; the agent keeps what the server has not acknowledged.
        open(os.path.join(work, "go"), "w").close()
        wait_files([os.path.join(work, f"printed-{r}") for r in (0, 1)])
        harness.wait_for(lambda: healthy(server), what="health after the restart")
        # The watcher's own readiness poll may see the new postmaster a moment after the API.
        harness.wait_for(lambda: "the embedded PostgreSQL is back" in full_log(server),
                         what="the line saying PostgreSQL is back")
        log = full_log(server)
        assert (f"the embedded PostgreSQL (postmaster pid {first}) was killed by signal 9"
                in log), log
        assert postmaster_pid(data) != first

        done = server.wait_job(job, {"SUCCEEDED", "FAILED", "STOPPED"}, timeout=120)
        assert done["status"] == "SUCCEEDED" and done["attempt"] == 1, done
        for rank in (0, 1):
            harness.wait_for(lambda: worker_lines(server, job, rank) == expected(rank),
                             timeout=30, what=f"rank {rank}'s log lines")
        harness.wait_for(
            lambda: len(server.request("GET", f"/api/v1/jobs/{job}/checkpoints")
                        .json["checkpoints"]) >= REPORTS, timeout=30, what="checkpoints")
        ckpts = server.request("GET", f"/api/v1/jobs/{job}/checkpoints").json["checkpoints"]
        assert len(ckpts) == REPORTS, ckpts
        # Each checkpoint is logged once, however many reports (ranks, resends) touched it.
        log = full_log(server)
        for k in range(1, REPORTS + 1):
            assert log.count(f"job {job} attempt 1: checkpoint {k} registered") == 1, log

        # A postmaster that cannot come back (its configuration is broken): the server gives up
        # after --pg-restart-attempts tries and exits non-zero with one error line.
        with open(os.path.join(data, "postgres", "postgresql.conf"), "a") as f:
            f.write("\nthis is not = a valid = line\n")
        os.kill(postmaster_pid(data), signal.SIGKILL)
        assert server.proc.wait(timeout=120) == 1  # not 0, nor a sanitizer's code
        # While PostgreSQL is down the pool's failures are logged too (one line every few
        # seconds); the line that explains the exit is the last error, and said once.
        errors = [ln for ln in full_log(server).splitlines() if " error " in ln]
        gave_up = [ln for ln in errors if "could not be restarted" in ln]
        assert len(gave_up) == 1 and errors[-1] == gave_up[0], errors
        assert "the embedded PostgreSQL in" in gave_up[0], gave_up
        assert "(2 attempts; last: postgres exited with code 1: " in gave_up[0], gave_up
        assert "configuration file" in gave_up[0], gave_up
    finally:
        if server.proc.poll() is None:
            server.stop()
