"""A failed job's page says once what failed (issue 23, point 5): the error with the rank and the
failure line of its output, not the same text again as the status message."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_dashboard import PY, cluster, run  # noqa: E402,F401 (cluster: the fixture)


def test_failed_job_page_shows_its_error_once_with_the_failure_line(cluster):
    s = cluster["server"]
    job = s.submit({"name": "raises", "working_dir": "/tmp",
                    "entrypoint": [PY, "-c", "raise ValueError('bad lr 3.0')"],
                    "scaling_config": {"num_workers": 1, "resources_per_worker": {"CPU": 1}},
                    "run_config": {"failure_config": {"max_failures": 0}}})["id"]
    assert s.wait_job(job, {"FAILED", "SUCCEEDED"})["status"] == "FAILED"
    got = run("job_error", cluster, cluster["viewer"], {"job": job})
    assert got["error"] == "worker rank 0 exited with code 1: ValueError: bad lr 3.0", got
    assert got["messages"] == [], got
