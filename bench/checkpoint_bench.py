#!/usr/bin/python3
"""Checkpoints (issue 11): how long report() blocks, upload throughput against dd, resume latency.

Starts PostgreSQL (harness-style, fsync off: the database is not the subject), one
trainyard-server (--artifact-dir in this run's temporary directory) and agent A, all on this
machine, then:

1. report block time. One job, one Python worker (worker/python/trainyard.py). For each size of
   --sizes (MiB, ascending; at 100 MiB also a variant of 100 files of 1 MiB) and --runs times,
   the worker writes a checkpoint directory of fresh os.urandom bytes (fsync'ed by the worker
   unless --no-worker-fsync, so the figure is the agent's cost, not the writeback of the
   worker's own data) and times trainyard.report(metrics, checkpoint=dir) with
   time.perf_counter. It counts the files left in the directory after report() (0 when the agent
   took them by rename: the directory is on the same filesystem as the agent's data directory)
   and removes what is left. The next checkpoint is written only once this
   one's artifact is complete, so each report() meets an idle agent.
2. upload throughput vs dd. Before every run of the largest size (one file), dd writes 1 GiB
   of zeros with conv=fdatasync into the server's --artifact-dir (same filesystem). Upload time
   is from report() returning (the agent owns the directory) to the first GET
   /api/v1/jobs/{id}/checkpoints, polled every 20 ms, that shows the checkpoint's
   artifact.state "complete"; throughput is the checkpoint's bytes over it (MB = 10^6 bytes, as
   dd counts). Also printed: the time from report() being called to complete.
3. resume latency. The writer job keeps num_to_keep 1, so the artifact store holds its last
   (largest) checkpoint. Agent A is drained; for each of --resume-runs a fresh agent B (its own
   data directory, no copy) joins, a one-worker job with resume_from_checkpoint is submitted,
   and the script takes: submit → RUNNING (the job's RUNNING event, server clock, same host),
   submit → the worker has listed the files (count and bytes checked) under
   TRAINYARD_CHECKPOINT_DIR (the worker's clock). A second job on the same B shows the cached
   case (no fetch). Then B is drained, stopped and its directory removed.

Between runs the agent's copies of checkpoints whose artifact is complete are removed (their
`location` paths) to keep disk use near 6 GiB; the script refuses to start with less free under
the temporary directory. Everything is removed at the end.

    /usr/bin/python3 bench/checkpoint_bench.py                       # 10,100,1024 MiB, 5 runs
    /usr/bin/python3 bench/checkpoint_bench.py --sizes 10,100 --runs 3 --resume-runs 1

Build first (cmake --build build; --build or TY_BUILD_DIR picks another). Prints the figures
(milliseconds, MB/s); --json FILE also writes every sample. Not a test: nothing asserts on time.
"""
import argparse
import http.client
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import launch_cluster as lc  # noqa: E402

MIB = 1 << 20
MIN_FREE = 6 << 30
POLL_S = 0.02

# The writer: checkpoint k per plan.json entry, each once go-<k-1> exists (the bench's signal
# that checkpoint k-1 is stored and the agent idle). One line per report in results.jsonl.
WRITER = r'''
import json, os, shutil, time
import trainyard
plan = json.load(open("plan.json"))
for k, item in enumerate(plan, 1):
    deadline = time.time() + 1800
    while not os.path.exists(f"go-{k - 1}"):
        if time.time() > deadline:
            raise SystemExit(f"no go-{k - 1} from the bench")
        time.sleep(0.01)
    d = os.path.abspath(f"ck-{k}")
    os.mkdir(d)
    per = item["bytes"] // item["files"]
    for i in range(item["files"]):
        with open(os.path.join(d, f"part-{i:03d}.bin"), "wb") as f:
            left = per
            while left:
                n = min(4 << 20, left)
                f.write(os.urandom(n))
                left -= n
            if item["fsync"]:
                f.flush()
                os.fsync(f.fileno())
    t_call = time.time()
    p0 = time.perf_counter()
    trainyard.report({"step": k, "loss": 1.0 / k}, checkpoint=d)
    p1 = time.perf_counter()
    t_ret = time.time()
    left = sum(len(n) for _, _, n in os.walk(d)) if os.path.isdir(d) else 0
    shutil.rmtree(d, ignore_errors=True)
    with open("results.jsonl", "a") as f:
        f.write(json.dumps({"k": k, "report_ms": (p1 - p0) * 1e3, "t_call": t_call,
                            "t_ret": t_ret, "left": left}) + "\n")
'''

# The reader: lists what it finds under TRAINYARD_CHECKPOINT_DIR and when.
READER = r'''
import json, os, time
t_start = time.time()
import trainyard
ck = trainyard.get_checkpoint()
files = size = 0
for root, _, names in os.walk(ck or "/nonexistent"):
    for n in names:
        files += 1
        size += os.path.getsize(os.path.join(root, n))
t_seen = time.time()
with open("seen.json", "w") as f:
    json.dump({"t_start": t_start, "t_seen": t_seen, "dir": ck, "files": files, "bytes": size}, f)
'''


class Client:
    """A keep-alive HTTP/1.1 connection to the REST API (polling every 20 ms through urllib
    would open a connection per poll)."""

    def __init__(self, server):
        self.port, self.token, self.conn = server.port, server.admin_token, None

    def get(self, path):
        for attempt in range(3):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                self.conn.request("GET", path, headers={"Authorization": f"Bearer {self.token}"})
                r = self.conn.getresponse()
                body = r.read()
                if r.status != 200:
                    raise RuntimeError(f"GET {path}: {r.status} {body[:300]!r}")
                return json.loads(body)
            except (http.client.HTTPException, OSError):
                if self.conn:
                    self.conn.close()
                self.conn = None
                if attempt == 2:
                    raise
        raise RuntimeError("unreachable")


def plan_of(sizes, runs, fsync):
    """The writer's checkpoints: (label, bytes, files) per run, smallest first; the 100-file
    variant right after 100 MiB, so the last one is of the largest size."""
    plan = []
    for mib in sorted(set(sizes)):
        variants = [(f"{mib} MiB, 1 file", 1)]
        if mib == 100:
            variants.append(("100 MiB, 100 files", 100))
        for label, files in variants:
            plan += [{"label": label, "bytes": mib * MIB, "files": files, "fsync": fsync}] * runs
    return plan


def run_dd(directory):
    """dd 1 GiB of zeros with conv=fdatasync into `directory`: MB/s (10^6 bytes) from dd's own
    byte count and seconds."""
    path = os.path.join(directory, "dd.bin")
    out = subprocess.run(["dd", "if=/dev/zero", f"of={path}", "bs=1M", "count=1024",
                          "conv=fdatasync"], stderr=subprocess.PIPE, text=True, check=True).stderr
    os.unlink(path)
    m = re.search(r"^(\d+) bytes .* copied, ([\d.,]+) s", out, re.M)
    if not m:
        raise RuntimeError(f"cannot read dd's output: {out}")
    return int(m.group(1)) / float(m.group(2).replace(",", ".")) / 1e6


def wait_lines(path, n, proc_check, timeout=1800):
    """The first n JSON lines of `path` once it has them."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.exists(path):
            with open(path) as f:
                lines = [ln for ln in f.read().splitlines() if ln.strip()]
            if len(lines) >= n:
                return [json.loads(ln) for ln in lines[:n]]
        proc_check()
        time.sleep(0.005)
    raise RuntimeError(f"{path}: fewer than {n} results after {timeout} s")


def cpu_s(pid):
    """CPU seconds (user + system, every thread) process pid has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sha256_mbps(mib=256):
    """SHA-256 throughput of one core (hashlib is OpenSSL's, as the server and agent use)."""
    buf = os.urandom(64 << 20)
    t0 = time.perf_counter()
    h = hashlib.sha256()
    for _ in range(mib // 64):
        h.update(buf)
    return mib * (1 << 20) / (time.perf_counter() - t0) / 1e6


def wait_complete(client, job, k, proc_check, timeout=1800):
    """Polls the job's checkpoints every 20 ms until index k's artifact is complete: (time seen,
    the checkpoint)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for c in client.get(f"/api/v1/jobs/{job}/checkpoints")["checkpoints"]:
            if c["index"] == k and c["artifact"]["state"] == "complete":
                return time.time(), c
        proc_check()
        time.sleep(POLL_S)
    raise RuntimeError(f"checkpoint {k} of job {job} not complete after {timeout} s")


def drop_agent_copy(ck):
    """Removes the agents' own copies of a stored checkpoint (disk: the store has it)."""
    for loc in ck.get("location") or []:
        if loc.get("path"):
            shutil.rmtree(loc["path"], ignore_errors=True)


def write_phase(a, h, srv, agent, client, root, dd_dir):
    """Parts 1 and 2: returns (per-run samples, dd MB/s list, writer job id, last checkpoint)."""
    plan = plan_of(a.sizes, a.runs, not a.no_worker_fsync)
    work = os.path.join(root, "writer")
    os.makedirs(work)
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(WRITER)
    with open(os.path.join(work, "plan.json"), "w") as f:
        json.dump(plan, f)
    job = srv.submit({"name": "ckbench-writer", "entrypoint": ["/usr/bin/python3", "train.py"],
                      "working_dir": work, "timeout_s": 7200,
                      "scaling_config": {"num_workers": 1},
                      "run_config": {"checkpoint_config": {"num_to_keep": 1}}})["id"]

    def check():
        st = client.get(f"/api/v1/jobs/{job}")["status"]
        if st in ("FAILED", "STOPPED"):
            raise RuntimeError(f"writer job {job} {st}:\n{agent.log_text()}\n{srv.log_text()}")

    largest = plan[-1]["label"]
    samples, dds, last = [], [], None
    for k, item in enumerate(plan, 1):
        if item["label"] == largest:
            dds.append(run_dd(dd_dir))
        cpu0 = cpu_s(srv.proc.pid), cpu_s(agent.proc.pid)
        open(os.path.join(work, f"go-{k - 1}"), "w").close()
        res = wait_lines(os.path.join(work, "results.jsonl"), k, check)[-1]
        t_done, last = wait_complete(client, job, k, check)
        up_s = t_done - res["t_ret"]
        gib = item["bytes"] / (1 << 30)
        samples.append({**item, **res, "upload_s": up_s, "call_to_stored_s": t_done - res["t_call"],
                        "upload_mbps": item["bytes"] / up_s / 1e6,
                        "server_cpu_s_per_gib": (cpu_s(srv.proc.pid) - cpu0[0]) / gib,
                        "agent_cpu_s_per_gib": (cpu_s(agent.proc.pid) - cpu0[1]) / gib,
                        "dd_mbps": dds[-1] if item["label"] == largest else None})
        print(f"  {k}/{len(plan)} {item['label']}: report {res['report_ms']:.1f} ms, "
              f"{res['left']} files left, stored {up_s:.2f} s after", flush=True)
        if k < len(plan):
            drop_agent_copy(last)
    open(os.path.join(work, f"go-{len(plan)}"), "w").close()
    done = srv.wait_job(job, {"SUCCEEDED", "FAILED", "STOPPED"}, timeout=120)
    if done["status"] != "SUCCEEDED":
        raise RuntimeError(f"writer job ended {done['status']}:\n{agent.worker_log(job, 0)}")
    return samples, dds, job, last


def resume_job(srv, client, root, ck, name):
    """Submits one reader job resuming from ck and waits for it: its latency sample, or, for a
    job that did not succeed, {"error": its status message, "failed_ms": submit -> finished}."""
    work = tempfile.mkdtemp(prefix="reader-", dir=root)
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(READER)
    spec = {"name": name, "entrypoint": ["/usr/bin/python3", "train.py"], "working_dir": work,
            "scaling_config": {"num_workers": 1}, "resume_from_checkpoint": ck["id"]}
    t0 = time.time()
    job = srv.submit(spec)["id"]
    done = srv.wait_job(job, {"SUCCEEDED", "FAILED", "STOPPED"}, timeout=600)
    base = {"job": job, "ck_bytes": ck["size_bytes"]}
    if done["status"] != "SUCCEEDED":
        return {**base, "error": f"{done['status']}: {done.get('status_message')}",
                "failed_ms": (lc.parse_ts(done["finished_at"]) - t0) * 1e3}
    with open(os.path.join(work, "seen.json")) as f:
        seen = json.load(f)
    if seen["files"] != ck["artifact"]["file_count"] or seen["bytes"] != ck["size_bytes"]:
        raise RuntimeError(f"resume job {job} saw {seen}, the checkpoint is {ck}")
    events = client.get(f"/api/v1/jobs/{job}/events")["events"]
    running = next(lc.parse_ts(e["at"]) for e in events if e["status"] == "RUNNING")
    msgs = [e.get("message") or "" for e in events]
    if any("holds no copy" in m for m in msgs):
        raise RuntimeError(f"resume job {job} ran without the checkpoint: {msgs}")
    shutil.rmtree(work, ignore_errors=True)
    return {**base, "running_ms": (running - t0) * 1e3,
            "files_ms": (seen["t_seen"] - t0) * 1e3,
            "worker_start_ms": (seen["t_start"] - t0) * 1e3,
            "bytes": seen["bytes"], "files": seen["files"]}


def describe(sample):
    if "error" in sample:
        return f"FAILED after {sample['failed_ms']:.0f} ms ({sample['error']})"
    return f"running {sample['running_ms']:.0f} ms, files seen {sample['files_ms']:.0f} ms"


def resume_phase(a, h, srv, agent_a, client, root, ck):
    """Part 3: fetch (fresh node B) and cached (the same B again) samples."""
    r = srv.request("POST", f"/api/v1/nodes/{agent_a.node_id}/drain")
    if r.status != 200:
        raise RuntimeError(f"drain A: {r}")
    fetched, cached = [], []
    for i in range(a.resume_runs):
        b = h.Agent(srv, data_dir=os.path.join(root, f"agent-b{i}", "data"), cpus=2)
        b.start()
        try:
            fetched.append(resume_job(srv, client, root, ck, f"ckbench-resume-{i}"))
            b.wait_node(timeout=120)  # back, if a long fetch got it marked LOST meanwhile
            cached.append(resume_job(srv, client, root, ck, f"ckbench-cached-{i}"))
            print(f"  resume {i + 1}/{a.resume_runs}: {describe(fetched[-1])}; cached: "
                  f"{describe(cached[-1])}", flush=True)
        finally:
            srv.request("POST", f"/api/v1/nodes/{b.node_id}/drain")
            b.stop()
            shutil.rmtree(os.path.dirname(b.log_path), ignore_errors=True)
            shutil.rmtree(os.path.join(root, f"agent-b{i}"), ignore_errors=True)
    return fetched, cached


def med_max(values):
    return statistics.median(values), max(values)


def print_ceiling(big, dd):
    """What this machine allows an upload whose both ends run on it: the CPU the server and the
    agent used per GiB (measured during the uploads above) over the CPUs there are, and one
    core's SHA-256 rate (the server hashes every byte in order to verify the part)."""
    srv_cpu = statistics.median(s["server_cpu_s_per_gib"] for s in big)
    agent_cpu = statistics.median(s["agent_cpu_s_per_gib"] for s in big)
    ncpu = os.cpu_count()
    floor_s = (srv_cpu + agent_cpu) / ncpu
    cpu_mbps = (1 << 30) / floor_s / 1e6
    sha = sha256_mbps()
    print(f"CPU per GiB uploaded, median: server {srv_cpu:.2f} s, agent {agent_cpu:.2f} s; on "
          f"{ncpu} CPUs no upload with both ends here can beat {floor_s:.2f} s per GiB "
          f"({cpu_mbps:.0f} MB/s, {cpu_mbps / dd:.2f} of dd)")
    print(f"SHA-256 on one core, this run: {sha:.0f} MB/s ({sha / dd:.2f} of dd): the most any "
          "upload the server verifies by SHA-256 can reach, with nothing else to do")


def print_figures(samples, dds, fetched, cached):
    print()
    print(f"# {lc.machine_caveats()}")
    print("## 1. report() block time (ms; goal <= 5 at any size)")
    print(f"{'checkpoint':<20} {'runs':>4} {'median':>9} {'max':>9} {'files left':>10} "
          f"{'upload MB/s':>11}")
    labels = []
    for s in samples:
        if s["label"] not in labels:
            labels.append(s["label"])
    for label in labels:
        rows = [s for s in samples if s["label"] == label]
        med, mx = med_max([s["report_ms"] for s in rows])
        left = max(s["left"] for s in rows)
        up = statistics.median(s["upload_mbps"] for s in rows)
        print(f"{label:<20} {len(rows):>4} {med:>9.1f} {mx:>9.1f} {left:>10} {up:>11.0f}")
    big = [s for s in samples if s["dd_mbps"] is not None]
    up = statistics.median(s["upload_mbps"] for s in big)
    dd = statistics.median(dds)
    print(f"## 2. upload of {big[0]['label']} vs dd (MB/s = 10^6 bytes/s; goal ratio >= 0.80)")
    print(f"dd 1 GiB conv=fdatasync, median of {len(dds)}: {dd:.0f} MB/s "
          f"(runs: {', '.join(f'{d:.0f}' for d in dds)})")
    runs = ", ".join(f"{s['upload_mbps']:.0f}" for s in big)
    print(f"upload, report returned -> artifact complete, median of {len(big)}: {up:.0f} MB/s "
          f"({statistics.median(s['upload_s'] for s in big):.2f} s; runs: {runs})")
    print(f"report called -> artifact complete, median: "
          f"{statistics.median(s['call_to_stored_s'] for s in big):.2f} s")
    print(f"ratio upload / dd: {up / dd:.2f}")
    print_ceiling(big, dd)
    if fetched:
        gib = fetched[0]["ck_bytes"] / (1 << 30)
        print(f"## 3. resume from a {gib:.2f} GiB checkpoint (ms from submission)")
        print(f"{'node B':<20} {'ok/runs':>7} {'RUNNING med':>11} {'max':>7} "
              f"{'files seen med':>14} {'max':>7}")
        for name, rows in (("no copy (fetches)", fetched), ("cached (same node)", cached)):
            ok = [s for s in rows if "error" not in s]
            cols = "-"
            if ok:
                rm, rx = med_max([s["running_ms"] for s in ok])
                fm, fx = med_max([s["files_ms"] for s in ok])
                cols = f"{rm:>11.0f} {rx:>7.0f} {fm:>14.0f} {fx:>7.0f}"
            print(f"{name:<20} {len(ok):>3}/{len(rows):<3} {cols}")
            for s in rows:
                if "error" in s:
                    print(f"  job {s['job']}: {describe(s)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.environ.get("TY_BUILD_DIR") or
                    os.path.join(ROOT, "build"))
    ap.add_argument("--sizes", default="10,100,1024",
                    type=lambda s: [int(x) for x in s.split(",") if x.strip()],
                    help="checkpoint sizes in MiB (comma-separated)")
    ap.add_argument("--runs", type=int, default=5, help="reports per size")
    ap.add_argument("--resume-runs", type=int, default=3, help="fresh nodes B (0: skip part 3)")
    ap.add_argument("--no-worker-fsync", action="store_true",
                    help="the worker does not fsync its files before report()")
    ap.add_argument("--server-arg", action="append", default=[])
    ap.add_argument("--json", help="also write every sample to this file")
    a = ap.parse_args()
    if not a.sizes or min(a.sizes) <= 0 or a.runs <= 0 or a.resume_runs < 0:
        ap.error("--sizes must be positive MiB, --runs >= 1, --resume-runs >= 0")
    tmp = tempfile.gettempdir()
    free = shutil.disk_usage(tmp).free
    if free < MIN_FREE:
        sys.exit(f"checkpoint_bench: only {free / (1 << 30):.1f} GiB free under {tmp}; it needs "
                 f"at least {MIN_FREE >> 30} GiB (1 GiB checkpoints are held by the worker, the "
                 "agent, the upload and the store at once). Free some space and run it again.")
    lc.use_build(a.build)
    h = lc.import_harness()
    root = tempfile.mkdtemp(prefix="ty-ckbench-", dir=tmp)
    os.chmod(root, 0o755)
    pg = srv = agent = None
    try:
        print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {free / (1 << 30):.0f} "
              f"GiB free under {tmp}; temporary data in {root}", flush=True)
        pg = h.PostgresCluster().start()
        art = os.path.join(root, "artifacts")
        os.makedirs(os.path.join(root, "server"))
        srv = h.Server(database_url=pg.url(pg.create_database()),
                       data_dir=os.path.join(root, "server", "data"),
                       extra_args=("--artifact-dir", art, *a.server_arg)).start()
        agent = h.Agent(srv, data_dir=os.path.join(root, "agent-a", "data"), cpus=2).start()
        client = Client(srv)
        os.makedirs(art, exist_ok=True)
        print("parts 1 and 2: reports and uploads", flush=True)
        samples, dds, _, last = write_phase(a, h, srv, agent, client, root, art)
        fetched = cached = []
        if a.resume_runs:
            print("part 3: resume on a node without a copy", flush=True)
            fetched, cached = resume_phase(a, h, srv, agent, client, root, last)
        print_figures(samples, dds, fetched, cached)
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"reports": samples, "dd_mbps": dds, "resume_fetched": fetched,
                           "resume_cached": cached}, f, indent=1)
    finally:
        for p in (agent, srv):
            if p is not None and p.proc is not None and p.proc.poll() is None:
                p.stop()
        if agent is not None:
            shutil.rmtree(os.path.dirname(agent.log_path), ignore_errors=True)
        if pg is not None:
            pg.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
