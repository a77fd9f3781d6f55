"""Issue 26, point 9: `trainyard nodes` shows what each node's workers hold (the API's per-node
`allocated`), tables print reals to 6 significant digits (-o json keeps every digit), command
help lists exit code 6 and leaves the global options to `trainyard --help`."""
import os
import textwrap

import harness

PY = "/usr/bin/python3"

# One report with a 16-digit loss, then held until the test lets it go (a file appears).
HOLD = textwrap.dedent("""
    import os, sys, time, trainyard
    trainyard.report({"loss": 1.0 / 3, "step": 1})
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.05)
""")


def test_nodes_show_what_workers_hold_reals_are_short_and_help_is_short():
    pg = harness.postgres()
    db = pg.create_database()
    server = harness.Server(database_url=pg.url(db)).start()
    agent = harness.Agent(server, cpus=4).start()
    work = harness.make_tmpdir("ty-cli-readable-")
    release = os.path.join(work, "release")
    with open(os.path.join(work, "hold.py"), "w") as f:
        f.write(HOLD)
    try:
        job = server.submit({"name": "hold", "entrypoint": [PY, "hold.py", release],
                             "working_dir": work, "backend": "none",
                             "scaling_config": {"num_workers": 1,
                                                "resources_per_worker": {"CPU": 1}}})["id"]
        server.wait_job(job, {"RUNNING"})
        harness.wait_for(lambda: server.request(
            "GET", f"/api/v1/jobs/{job}/metrics?name=loss").json["metrics"], what="the report")

        r = harness.run_cli(server, "nodes")
        assert r.returncode == 0, r.stderr
        header, row = [line for line in r.stdout.splitlines() if line.strip()][:2]
        assert "USED/TOTAL" in header, r.stdout
        assert "CPU 1/4" in row and "memory_mb 0/" in row, r.stdout

        r = harness.run_cli(server, "metrics", str(job))
        assert r.returncode == 0, r.stderr
        assert "0.333333" in r.stdout and "0.3333333" not in r.stdout, r.stdout
        r = harness.run_cli(server, "-o", "json", "metrics", str(job))
        assert "0.3333333333333333" in r.stdout, r.stdout

        r = harness.run_cli(server, "nodes", "--help")
        assert r.returncode == 0, r.stderr
        assert "6 --wait --assert" in r.stdout, r.stdout
        assert "TRAINYARD_TOKEN" not in r.stdout and "trainyard --help" in r.stdout, r.stdout
        r = harness.run_cli(server, "--help")
        assert "TRAINYARD_TOKEN" in r.stdout and "6 --wait --assert" in r.stdout, r.stdout
    finally:
        open(release, "w").close()
        server.wait_job(job, {"SUCCEEDED", "FAILED"})
        agent.stop()
        assert server.stop() == 0, server.log_text()
        pg.drop_database(db)
        pg.stop()
