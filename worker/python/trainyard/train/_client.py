"""The REST client behind trainyard.train and trainyard.job_submission (standard library only).

Client(address, token) talks to a Trainyard server: jobs, logs, metrics, checkpoints and code
packages (docs/python-api.md). address defaults to TRAINYARD_SERVER, token to TRAINYARD_TOKEN.
"""

import hashlib
import json
import os
import urllib.error
import urllib.parse
import urllib.request

__all__ = ["Client", "TrainyardAPIError"]

CODE_CHUNK = 512 * 1024  # under the server's default --max-body-bytes (1 MiB)


class TrainyardAPIError(RuntimeError):
    """The server answered with an error (status and its problem+json detail), or none came."""

    def __init__(self, message, status=None, problem=None):
        super().__init__(message)
        self.status = status
        self.problem = problem or {}


class Client:
    """One Trainyard server. Every method raises TrainyardAPIError on a failed call."""

    def __init__(self, address=None, token=None, timeout=30.0):
        address = address or os.environ.get("TRAINYARD_SERVER") or "http://127.0.0.1:8080"
        if "://" not in address:
            address = "http://" + address
        self.address = address.rstrip("/")
        self.token = token if token is not None else os.environ.get("TRAINYARD_TOKEN")
        self.timeout = timeout

    # --- plumbing ---

    def request(self, method, path, body=None, headers=None, raw=False):
        """Sends one request; returns the parsed JSON reply (raw: the bytes)."""
        h = dict(headers or {})
        data = None
        if isinstance(body, (bytes, bytearray)):
            data = bytes(body)
            h.setdefault("Content-Type", "application/octet-stream")
        elif body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        req = urllib.request.Request(self.address + path, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                payload = r.read()
        except urllib.error.HTTPError as e:
            text = e.read().decode("utf-8", "replace")
            try:
                problem = json.loads(text)
            except ValueError:
                problem = {"detail": text[:300]}
            detail = problem.get("detail") or problem.get("title") or text[:300]
            raise TrainyardAPIError(f"{method} {path}: HTTP {e.code}: {detail}", e.code,
                                    problem) from None
        except (urllib.error.URLError, OSError) as e:
            raise TrainyardAPIError(f"cannot reach the Trainyard server at {self.address}: "
                                    f"{getattr(e, 'reason', e)}") from None
        if raw:
            return payload
        return json.loads(payload) if payload else None

    # --- jobs ---

    def submit_job(self, spec):
        """Submits a job spec (dict); returns the job id."""
        return self.request("POST", "/api/v1/jobs", spec)["id"]

    def get_job(self, job_id):
        return self.request("GET", f"/api/v1/jobs/{int(job_id)}")

    def get_job_status(self, job_id):
        return self.get_job(job_id)["status"]

    def list_jobs(self, status=None, limit=None):
        q = {}
        if status:
            q["status"] = status
        if limit:
            q["limit"] = str(limit)
        path = "/api/v1/jobs" + ("?" + urllib.parse.urlencode(q) if q else "")
        return self.request("GET", path)["jobs"]

    def stop_job(self, job_id):
        return self.request("POST", f"/api/v1/jobs/{int(job_id)}/stop")

    def get_job_logs(self, job_id, rank=None, tail=None, attempt=None):
        """The job's log text ('[rank R] ' prefixed when several ranks)."""
        q = {k: str(v) for k, v in (("rank", rank), ("tail", tail), ("attempt", attempt))
             if v is not None}
        path = f"/api/v1/jobs/{int(job_id)}/logs" + ("?" + urllib.parse.urlencode(q) if q else "")
        return self.request("GET", path, raw=True).decode("utf-8", "replace")

    def get_log_lines(self, job_id, attempt=None):
        """The job's log lines as dicts {rank, attempt, offset, line}."""
        q = {"format": "jsonl"}
        if attempt is not None:
            q["attempt"] = str(attempt)
        text = self.request("GET", f"/api/v1/jobs/{int(job_id)}/logs?" + urllib.parse.urlencode(q),
                            raw=True).decode("utf-8", "replace")
        return [json.loads(x) for x in text.splitlines() if x.strip()]

    def get_workers(self, job_id):
        return self.request("GET", f"/api/v1/jobs/{int(job_id)}/workers")["workers"]

    def get_metrics(self, job_id, rank=None):
        q = "" if rank is None else f"?rank={int(rank)}"
        return self.request("GET", f"/api/v1/jobs/{int(job_id)}/metrics{q}")["metrics"]

    def get_checkpoints(self, job_id):
        return self.request("GET", f"/api/v1/jobs/{int(job_id)}/checkpoints")["checkpoints"]

    def get_checkpoint_archive(self, checkpoint_id):
        """The checkpoint's files as one tar (bytes)."""
        return self.request("GET", f"/api/v1/checkpoints/{int(checkpoint_id)}/archive", raw=True)

    # --- code packages ---

    def code_state(self, sha256):
        """"missing", "uploading" or "complete": what the server holds of package sha256."""
        return self.request("GET", f"/api/v1/code/{sha256}")["state"]

    def upload_code(self, data):
        """Stores a packed working directory or checkpoint directory (tar.gz bytes) unless this
        user uploaded it before: only a package's uploaders (and admins) may name it in a job.
        Returns (sha256, uploaded: bool)."""
        sha = hashlib.sha256(data).hexdigest()
        st = self.request("GET", f"/api/v1/code/{sha}")
        if st["state"] == "complete" and st.get("owned", True):
            return sha, False
        off = st.get("offset", 0) or 0
        while off < len(data):
            chunk = data[off:off + CODE_CHUNK]
            r = self.request("PUT", f"/api/v1/code/{sha}?offset={off}", chunk,
                             {"X-Content-SHA256": hashlib.sha256(chunk).hexdigest()})
            if r["state"] == "complete" and r.get("owned", True):
                return sha, False
            off = max(r["offset"], off + len(chunk))
        self.request("POST", f"/api/v1/code/{sha}/complete", {})
        return sha, True
