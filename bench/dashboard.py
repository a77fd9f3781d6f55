#!/usr/bin/python3
"""The web dashboard's figures (docs/dashboard.md), in headless Chromium (playwright-core) against
a real server, PostgreSQL and agent:

  1. time to first chart: a job with --points metric points (default 1,000,000) over 8 ranks,
     written straight into the store (one INSERT ... generate_series: the rows the report path
     writes, the fastest legitimate way in); the page is loaded --runs times (a fresh load each
     time, token already signed in) and the time from navigation start to the first chart drawn
     is taken, plus the time of the metrics request alone;
  2. frame time while 8 ranks stream: a real job of 8 workers each reporting 10 points a second
     (and printing a log line each) through the Python SDK; the job page follows it live for
     --seconds (default 60; --minutes 10 for the long run) while requestAnimationFrame intervals
     and the page's script time are recorded;
  3. JS heap over that live run: the heap after a forced GC, sampled every --every seconds;
  4. the compare page: 4 runs x 8 ranks x 3 metrics (--compare-steps reports per rank, each
     with the 3 numbers, written like 1.), from navigation start to every chart, the summary and
     the config diff drawn, --runs times.

Not a test: nothing is asserted.

    /usr/bin/python3 bench/dashboard.py --build build            # about 3 minutes
    /usr/bin/python3 bench/dashboard.py --build build --minutes 10
"""
import argparse
import json
import os
import subprocess
import sys
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)

WORKER = textwrap.dedent("""
    import time, trainyard
    rank = trainyard.get_context().get_world_rank()
    step = 0
    t0 = time.time()
    while True:
        step += 1
        print(f"rank {rank} step {step}", flush=True)
        trainyard.report({"loss": 1.0 / step + 0.01 * rank, "step": step})
        time.sleep(max(0.0, t0 + step / 10.0 - time.time()))
""")


def blocks_caught_up(pg, db):
    """Waits for the leader's maintenance to have summed up every complete block of 16 of the
    reports inserted (migration 0050: no writer stores report_blocks itself; until then a band
    sums up the missing blocks from the reports), so that the pages are timed as they are read
    once it has; prints how long that took."""
    t = time.time()
    while int(pg.psql("SELECT count(*) FROM report_series WHERE seq_max >> 4 > block_next",
                      db=db)):
        time.sleep(0.2)
    print(f"the leader's maintenance summed up their blocks {time.time() - t:.1f} s after",
          flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(SOURCE, "build"))
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--minutes", type=float, default=0, help="live run length (overrides --seconds)")
    ap.add_argument("--every", type=int, default=10, help="seconds between heap samples")
    ap.add_argument("--compare-steps", type=int, default=25_000,
                    help="reports per rank of each compared run")
    ap.add_argument("--baseline", action="store_true",
                    help="also time the first chart and the compare page without report_blocks")
    ap.add_argument("--no-live", action="store_true", help="skip the live part")
    args = ap.parse_args()
    live_s = int(args.minutes * 60) if args.minutes else args.seconds
    os.environ["TY_BUILD_DIR"] = os.path.abspath(args.build)
    sys.path.insert(0, os.path.join(SOURCE, "tests", "integration"))
    import harness

    pg = harness.PostgresCluster().start()
    db = pg.create_database()
    server = harness.Server(database_url=pg.url(db)).start()
    agent = harness.Agent(server, cpus=8).start()
    try:
        big = server.submit({"name": "bench-1M", "entrypoint": ["/bin/true"],
                             "scaling_config": {"num_workers": 8, "resources_per_worker":
                                                {"CPU": 100}}})["id"]
        per_rank = args.points // 8
        t = time.time()
        pg.psql(f"INSERT INTO reports (job_id, attempt, rank, seq, step, reported_at, metrics) "
                f"SELECT {big}, 1, r, s, s, now() - interval '1 hour' + s * interval '10 ms', "
                f"jsonb_build_object('loss', 1.0 / s + 0.01 * r + random() * 0.05) "
                f"FROM generate_series(0, 7) r, generate_series(1, {per_rank}) s", db=db)
        pg.psql("ANALYZE reports", db=db)
        print(f"inserted {per_rank * 8} points over 8 ranks in {time.time() - t:.1f} s", flush=True)
        blocks_caught_up(pg, db)
        for q in ("mode=band&max_points=600&rank=0", "mode=band&max_points=600", "max_points=600"):
            t = time.time()
            r = server.request("GET", f"/api/v1/jobs/{big}/metrics?{q}", timeout=120)
            print(f"GET /jobs/{{id}}/metrics?{q}: {r.status}, {len(r.text)} bytes in "
                  f"{(time.time() - t) * 1000:.0f} ms (curl-like client)", flush=True)

        def browser(phase, **kw):
            env = dict(os.environ, TY_URL=server.url, TY_TOKEN=server.admin_token,
                       TY_PLAYWRIGHT=os.path.join(SOURCE, "web", "node_modules",
                                                  "playwright-core", "index.mjs"),
                       TY_ARGS=json.dumps({"phase": phase, **kw}))
            p = subprocess.run(["node", os.path.join(HERE, "dashboard.mjs")], env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=live_s + 600)
            print(p.stdout, end="", flush=True)
            if p.returncode != 0:
                print(server.log_text()[-3000:])
                sys.exit(1)

        browser("first", big=big, runs=args.runs, points=per_rank * 8)
        if args.baseline:
            # The same page read without report_blocks (migration 0046): every band is then cut
            # from the reports themselves, as before it. The blocks come back with a new job.
            # report_series (migration 0047) goes too: without it no block is summed up at read
            # time or by the leader's maintenance.
            pg.psql("TRUNCATE report_blocks, report_series", db=db)
            print("baseline (report_blocks emptied: bands cut from every report):", flush=True)
            browser("first", big=big, runs=args.runs, points=per_rank * 8)
        runs = []
        t = time.time()
        for k in range(4):
            job = server.submit({"name": f"bench-compare-{k}", "entrypoint": ["/bin/true"],
                                 "train_loop_config": {"lr": 10 ** -(k + 2), "batch": 32 << k},
                                 "scaling_config": {"num_workers": 8, "resources_per_worker":
                                                    {"CPU": 100}}})["id"]
            pg.psql(f"INSERT INTO reports (job_id, attempt, rank, seq, step, reported_at, metrics) "
                    f"SELECT {job}, 1, r, s, s, now() - interval '1 hour' + s * interval '10 ms', "
                    f"jsonb_build_object('loss', 1.0 / s + {k} * 0.01 + random() * 0.05, "
                    f"'accuracy', 1 - 1.0 / s, 'lr', {10 ** -(k + 2)}) "
                    f"FROM generate_series(0, 7) r, generate_series(1, {args.compare_steps}) s",
                    db=db)
            runs.append(job)
        pg.psql("ANALYZE reports", db=db)
        print(f"inserted 4 runs x 8 ranks x {args.compare_steps} reports x 3 metrics in "
              f"{time.time() - t:.1f} s", flush=True)
        blocks_caught_up(pg, db)
        browser("compare", jobs=runs, runs=args.runs, steps=args.compare_steps)
        if args.baseline:
            pg.psql("TRUNCATE report_blocks, report_series", db=db)
            print("baseline (report_blocks emptied):", flush=True)
            browser("compare", jobs=runs, runs=args.runs, steps=args.compare_steps)
        if args.no_live:
            return
        work = harness.make_tmpdir("ty-bench-web-")
        with open(os.path.join(work, "train.py"), "w") as f:
            f.write(WORKER)
        live = server.submit({"name": "bench-live", "entrypoint": ["/usr/bin/python3", "train.py"],
                              "working_dir": work, "backend": "none",
                              "scaling_config": {"num_workers": 8,
                                                 "resources_per_worker": {"CPU": 1}}})["id"]
        server.wait_job(live, {"RUNNING"}, timeout=60)
        browser("live", live=live, seconds=live_s, every=args.every)
        server.request("POST", f"/api/v1/jobs/{live}/stop", {})
        server.wait_job(live, {"STOPPED"})
    finally:
        agent.stop()
        server.stop()
        pg.drop_database(db)
        pg.stop()


if __name__ == "__main__":
    main()
