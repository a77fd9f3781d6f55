"""Shared helpers for the launch/overhead/memory benchmarks (bench/launch_*.py, bench/memory*.py).

Reuses tests/integration/harness.py to start a real PostgreSQL, trainyard-server and
trainyard-agent on this machine. Not a test: nothing here asserts on timings.

The build directory comes from --build (or TY_BUILD_DIR), default build-bench3 (Release).
"""
import datetime
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def use_build(build_dir):
    """Points the harness at a build directory. Call before import_harness()."""
    os.environ["TY_BUILD_DIR"] = os.path.abspath(build_dir)
    os.environ.setdefault("TY_SOURCE_DIR", ROOT)


def import_harness():
    sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
    import harness  # noqa: E402
    return harness


def default_build():
    return os.environ.get("TY_BUILD_DIR") or os.path.join(ROOT, "build-bench3")


class Cluster:
    """PostgreSQL (external, harness-style: fsync off) or the server's embedded one (durable, the
    default deployment), one trainyard-server, optionally one trainyard-agent."""

    def __init__(self, db="embedded", agent_cpus=None, server_args=(), agent_args=(),
                 memory_mb=65536):
        self.h = import_harness()
        self.db_mode = db
        self.pg = None
        self.dbname = None
        self.server = None
        self.agent = None
        self.agent_cpus = agent_cpus
        self.server_args = list(server_args)
        self.agent_args = list(agent_args)
        self.memory_mb = memory_mb

    def start(self):
        h = self.h
        url = None
        if self.db_mode == "external":
            self.pg = h.PostgresCluster().start()
            self.dbname = self.pg.create_database()
            url = self.pg.url(self.dbname)
        self.server = h.Server(database_url=url, extra_args=self.server_args).start()
        if self.agent_cpus:
            self.agent = h.Agent(self.server, cpus=self.agent_cpus, memory_mb=self.memory_mb,
                                 extra_args=self.agent_args).start()
        return self

    def stop(self):
        for p in (self.agent, self.server):
            try:
                if p is not None:
                    p.stop()
            except Exception as e:  # keep tearing down
                print(f"# teardown: {e}", file=sys.stderr)
        if self.pg is not None:
            self.pg.stop()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def parse_ts(text):
    """RFC 3339 with microseconds (and 'Z' or an offset) → POSIX seconds (float)."""
    t = text.replace("Z", "+00:00")
    return datetime.datetime.fromisoformat(t).timestamp()


def percentile(values, p):
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    s = sorted(values)
    if not s:
        return float("nan")
    k = max(0, min(len(s) - 1, int(-(-p * len(s) // 100)) - 1))
    return s[k]


def summary(values):
    """dict of n, p50, p90, p99, max, mean for a list of numbers."""
    if not values:
        return {"n": 0}
    return {"n": len(values), "min": min(values), "p50": percentile(values, 50),
            "p90": percentile(values, 90), "p99": percentile(values, 99), "max": max(values),
            "mean": statistics.fmean(values)}


def proc_status(pid):
    """VmRSS and VmHWM of a process in kB (from /proc/<pid>/status)."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem", "Threads", "VmSize"):
                out[k] = int(v.split()[0])
    return out


def cpu_seconds_of(pid):
    """utime + stime of a process in seconds (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def postgres_pids(pgdata):
    """The postmaster of the cluster in pgdata and its children (backends, walwriter, ...)."""
    try:
        with open(os.path.join(pgdata, "postmaster.pid")) as f:
            master = int(f.readline())
    except (OSError, ValueError):
        return []
    pids = [master]
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/status") as f:
                for line in f:
                    if line.startswith("PPid:"):
                        if int(line.split()[1]) == master:
                            pids.append(int(d))
                        break
        except OSError:
            pass
    return pids


def service_cpu(cluster):
    """CPU seconds used so far by the cluster's server, agent and PostgreSQL processes (exited
    backends are not counted: sample before and after and take the difference)."""
    pids = [cluster.server.proc.pid]
    if cluster.agent is not None:
        pids.append(cluster.agent.proc.pid)
    pgdata = (cluster.pg.pgdata if cluster.pg is not None
              else os.path.join(cluster.server.data_dir, "postgres"))
    pids += postgres_pids(pgdata)
    return sum(cpu_seconds_of(p) for p in pids)


def machine_caveats():
    """A line about the machine: CPUs, load, kernel — printed with every figure."""
    try:
        load = open("/proc/loadavg").read().split()[:3]
    except OSError:
        load = ["?"]
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (f"{os.cpu_count()} CPUs ({model}), load average {' '.join(load)}, "
            f"kernel {os.uname().release}")


def dumps(obj):
    return json.dumps(obj, indent=1, sort_keys=True)


def print_phases(samples, phases, json_path=None):
    """A table of p50, p90, max and mean per phase over samples (dicts of seconds), printed in
    milliseconds; the samples also go to json_path when given."""
    print(f"{'phase':8} {'p50':>7} {'p90':>7} {'max':>7} {'mean':>7}")
    for p in phases:
        s = summary([x[p] * 1e3 for x in samples])
        print(f"{p:8} {s['p50']:7.0f} {s['p90']:7.0f} {s['max']:7.0f} {s['mean']:7.0f}")
    if json_path:
        with open(json_path, "w") as f:
            f.write(dumps(samples))
