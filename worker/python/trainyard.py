"""trainyard — the Python side of the Trainyard training SDK (standard library only).

    import trainyard
    ctx = trainyard.get_context()
    lr = ctx.config.get("lr", 0.1)
    start = trainyard.get_checkpoint()          # directory to resume from, or None
    ...
    trainyard.report({"loss": loss, "step": step}, checkpoint=ckpt_dir)

Under Trainyard the agent sets the environment (RANK, WORLD_SIZE, ..., TRAINYARD_REPORT_SOCKET)
and report() talks to the agent over the report protocol (docs/report-protocol.md): frames of
a 4-byte big-endian length plus a JSON object; a hello first, then one report per call, each
acknowledged by the agent before report() returns. Without Trainyard (no TRAINYARD_JOB_ID and
no RANK) the program is rank 0 of 1, the config comes from `--config FILE` (or {}), and
reports are printed to stderr as JSON lines, exactly as libtrainyard does.

Collectives are not here: use the framework's (torch.distributed reads the same MASTER_ADDR /
MASTER_PORT / RANK / WORLD_SIZE).
"""

import json
import math
import os
import socket
import struct
import sys
import threading
import time

import _trainyard_heartbeat

# trainyard.train, trainyard.job_submission (issue 15): submodules in the trainyard/ directory
# beside this file, found through __path__ while this file stays a module.
__path__ = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "trainyard")]

__all__ = [
    "TrainContext",
    "TrainyardError",
    "get_context",
    "get_checkpoint",
    "report",
    "should_checkpoint",
]

MAX_FRAME = 1024 * 1024
DEFAULT_REPORT_TIMEOUT_S = 120.0
RECONNECT_DELAY_S = 0.2


class TrainyardError(RuntimeError):
    """A report could not be delivered (agent gone, timeout, rejected) or bad input."""


def _env_int(name, default, lo=0, hi=1 << 31):
    raw = os.environ.get(name, "")
    if raw == "":
        if default is None:
            raise TrainyardError(f"{name} is not set")
        return default
    try:
        value = int(raw, 10)
    except ValueError:
        raise TrainyardError(f"{name}={raw!r} is not an integer") from None
    if not lo <= value <= hi:
        raise TrainyardError(f"{name}={raw!r} is out of range [{lo}, {hi}]")
    return value


def _config_from_argv():
    """Find --config FILE / --config=FILE in sys.argv, remove it, return the path or None."""
    argv = sys.argv
    for i, arg in enumerate(argv[1:], start=1):
        if arg == "--config":
            if i + 1 >= len(argv):
                raise TrainyardError("--config needs a file argument")
            path = argv[i + 1]
            del argv[i : i + 2]
            return path
        if arg.startswith("--config="):
            del argv[i]
            return arg[len("--config=") :]
    return None


class TrainContext:
    """Who this worker is, and its train_loop_config. Use get_context()."""

    def __init__(self):
        env = os.environ
        cfg_path = _config_from_argv()
        self.standalone = not env.get("TRAINYARD_JOB_ID") and not env.get("RANK")
        if self.standalone:
            self.world_rank, self.world_size = 0, 1
            self.local_rank, self.local_world_size, self.node_rank = 0, 1, 0
            self.job_id, self.attempt = "local", 0
            self.checkpoint_dir = None
            self.report_socket = None
            cfg_text = None
        else:
            self.world_size = _env_int("WORLD_SIZE", None, 1)
            self.world_rank = _env_int("RANK", None, 0, self.world_size - 1)
            self.local_world_size = _env_int("LOCAL_WORLD_SIZE", self.world_size, 1)
            self.local_rank = _env_int("LOCAL_RANK", self.world_rank, 0, self.local_world_size - 1)
            self.node_rank = _env_int("NODE_RANK", 0)
            self.job_id = env.get("TRAINYARD_JOB_ID") or "local"
            self.attempt = _env_int("TRAINYARD_ATTEMPT", 0)
            self.checkpoint_dir = env.get("TRAINYARD_CHECKPOINT_DIR") or None
            self.report_socket = env.get("TRAINYARD_REPORT_SOCKET") or None
            cfg_text = env.get("TRAINYARD_CONFIG") or None
        if cfg_text is not None:
            try:
                self.config = json.loads(cfg_text)
            except ValueError as e:
                raise TrainyardError(f"TRAINYARD_CONFIG is not valid JSON: {e}") from None
        elif cfg_path is not None:
            with open(cfg_path, encoding="utf-8") as f:
                self.config = json.load(f)
        else:
            self.config = {}
        timeout = env.get("TRAINYARD_REPORT_TIMEOUT_S", "")
        try:
            self.report_timeout = float(timeout) if timeout else DEFAULT_REPORT_TIMEOUT_S
        except ValueError:
            raise TrainyardError(f"TRAINYARD_REPORT_TIMEOUT_S={timeout!r} is not a number") from None
        self._seq = 0
        self._sock = None
        self._lock = threading.Lock()

    # Ray Train style accessors
    def get_world_rank(self):
        return self.world_rank

    def get_world_size(self):
        return self.world_size

    def get_local_rank(self):
        return self.local_rank

    def get_local_world_size(self):
        return self.local_world_size

    def get_node_rank(self):
        return self.node_rank

    def get_job_id(self):
        return self.job_id

    def get_attempt(self):
        return self.attempt

    def get_checkpoint(self):
        return self.checkpoint_dir

    def __repr__(self):
        return (
            f"TrainContext(job_id={self.job_id!r}, attempt={self.attempt}, "
            f"rank={self.world_rank}/{self.world_size}, local_rank={self.local_rank})"
        )

    # --- report protocol ---

    def _send(self, msg):
        payload = json.dumps(msg, separators=(",", ":"), allow_nan=False).encode("utf-8")
        if len(payload) > MAX_FRAME:
            raise TrainyardError("report larger than the 1 MiB frame limit")
        self._sock.sendall(struct.pack(">I", len(payload)) + payload)

    def _recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self._sock.recv(n - len(buf))
            if not chunk:
                raise TrainyardError("the agent closed the report connection")
            buf += chunk
        return buf

    def _recv(self):
        (n,) = struct.unpack(">I", self._recv_exact(4))
        if n == 0 or n > MAX_FRAME:
            raise TrainyardError(f"bad frame length {n} from the agent")
        msg = json.loads(self._recv_exact(n).decode("utf-8"))
        if not isinstance(msg, dict):
            raise TrainyardError("agent frame is not a JSON object")
        return msg

    def _connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.report_timeout)
        try:
            s.connect(self.report_socket)
        except OSError as e:
            s.close()
            raise TrainyardError(f"cannot reach the agent at {self.report_socket}: {e}") from None
        self._sock = s
        hello = {
            "type": "hello",
            "job_id": self.job_id,
            "attempt": self.attempt,
            "rank": self.world_rank,
            "pid": os.getpid(),
        }
        secret = os.environ.get("TRAINYARD_REPORT_SECRET")
        if secret:
            hello["secret"] = secret
        self._send(hello)

    def _close(self):
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def report(self, metrics, checkpoint=None):
        msg = _build_report(metrics, checkpoint)
        with self._lock:
            self._seq += 1
            seq = self._seq
            msg["seq"] = seq
            if self.standalone or not self.report_socket:
                print(json.dumps(msg, separators=(",", ":")), file=sys.stderr, flush=True)
                return
            # The agent may be restarting (docs/agent-restart.md): a lost connection is retried
            # with the same seq (the agent keeps each report once) until the report timeout.
            deadline = time.monotonic() + self.report_timeout
            while True:
                try:
                    if self._sock is None:
                        self._connect()
                    self._send(msg)
                    while True:
                        reply = self._recv()
                        if reply.get("type") == "ack" and reply.get("seq") == seq:
                            return
                        if reply.get("type") == "error" and reply.get("seq") in (seq, 0):
                            raise _Rejected(f"report {seq} rejected by the agent: "
                                            f"{reply.get('message', '')}")
                except _Rejected as e:
                    raise TrainyardError(str(e)) from None
                except socket.timeout:
                    self._close()
                    raise TrainyardError(
                        f"no ack from the agent within {self.report_timeout} s") from None
                except (OSError, ValueError, TrainyardError) as e:
                    self._close()
                    if time.monotonic() + RECONNECT_DELAY_S >= deadline:
                        raise TrainyardError(f"report failed: {e}") from None
                    time.sleep(RECONNECT_DELAY_S)


class _Rejected(Exception):
    pass


def _plain(key, value):
    """`value` as plain JSON data (numpy / torch scalars and arrays turned into Python numbers
    and lists, tuples into lists), or TrainyardError naming the metric `key` when it is not
    JSON-serialisable or holds a float that is not finite."""
    if isinstance(value, (str, bool)) or value is None:
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TrainyardError(f"metrics: {key!r} is not finite ({value})")
        return value
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TrainyardError(f"metrics: {key!r} has a key {k!r} that is not a string: "
                                     "not JSON-serialisable")
            out[k] = _plain(key, v)
        return out
    if isinstance(value, (list, tuple)):
        return [_plain(key, v) for v in value]
    for convert in ("item", "tolist"):  # numpy / torch scalars (item) and arrays (tolist)
        f = getattr(value, convert, None)
        if callable(f):
            try:
                plain = f()
            except (TypeError, ValueError, RuntimeError):
                continue
            if plain is not value:
                return _plain(key, plain)
    raise TrainyardError(f"metrics: {key!r} is a {type(value).__name__}, which is not "
                         "JSON-serialisable: report numbers, strings, booleans, None, or lists "
                         "and dicts of them")


def _build_report(metrics, checkpoint):
    """Validate metrics (a dict of JSON-serialisable values, optional int "step") and build a
    report message. Numbers are charted; other values are stored and returned as they are."""
    if not isinstance(metrics, dict):
        raise TrainyardError("metrics must be a dict")
    out = {}
    step = None
    for key, value in metrics.items():
        if not isinstance(key, str) or not key:
            raise TrainyardError(f"metrics: bad key {key!r}")
        if key == "step":
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise TrainyardError("metrics: 'step' must be a non-negative integer")
            step = value
            continue
        out[key] = _plain(key, value)
    msg = {"type": "report", "seq": 0, "metrics": out}
    if step is not None:
        msg["step"] = step
    if checkpoint is not None:
        path = getattr(checkpoint, "path", checkpoint)
        path = os.fspath(path)
        if not os.path.isdir(path):
            raise TrainyardError(f"checkpoint {path!r} is not a directory")
        msg["checkpoint_dir"] = os.path.realpath(path)
    return msg


_context = None
_context_lock = threading.Lock()


def get_context():
    """The process-wide TrainContext (created on first use)."""
    global _context
    with _context_lock:
        if _context is None:
            _context = TrainContext()
            _context._heartbeat = _trainyard_heartbeat.start(_context)
        return _context


def report(metrics, checkpoint=None):
    """Report metrics (a dict of JSON-serialisable values: numbers are charted, the others
    stored and returned as they are; optional int "step") and optionally a checkpoint
    directory (a path, or an object with a .path). Blocks until the agent owns the report.
    Every rank must call report() the same number of times. Raises TrainyardError."""
    get_context().report(metrics, checkpoint)


def should_checkpoint():
    """True when the agent asks this worker to save a checkpoint now (report() with a directory)
    because it is about to be stopped: its node is being drained, or a user stopped the job.
    SIGTERM follows after run_config.failure_config.preemption_grace_s. Cheap: call it every
    step."""
    path = os.environ.get("TRAINYARD_CHECKPOINT_REQUEST_FILE")
    return bool(path) and os.path.exists(path)


def get_checkpoint():
    """Directory of the checkpoint to resume from (TRAINYARD_CHECKPOINT_DIR), or None."""
    return get_context().checkpoint_dir
