"""trainyard.job_submission (ray.job_submission): Ray's Jobs SDK over a Trainyard server.

    client = JobSubmissionClient("http://127.0.0.1:8080")
    job_id = client.submit_job(entrypoint="python3 script.py",
                               runtime_env={"working_dir": "./", "env_vars": {"A": "1"}})
    client.get_job_status(job_id)            # JobStatus.SUCCEEDED
    async for lines in client.tail_job_logs(job_id): print(lines, end="")

Submission ids are strings: the job's number ("42"); "raysubmit_42" and 42 name it too. Jobs
run their entrypoint on num_workers workers (default 1, as Ray's one driver)."""

import asyncio
import enum
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from .train._client import Client, TrainyardAPIError
from .train._vocab import (JOB_PENDING, JOB_RESTARTING, JOB_RUNNING, JOB_STARTING, JOB_STOPPING,
                           TERMINAL_JOB_STATUSES)

__all__ = ["Client", "JobDetails", "JobInfo", "JobStatus", "JobSubmissionClient",
           "TrainyardAPIError"]

RUNTIME_ENV_KEYS = ("working_dir", "env_vars")
TAIL_POLL_MIN_S, TAIL_POLL_MAX_S = 0.1, 1.0
_ID = re.compile(r"^(?:raysubmit_)?([0-9]{1,18})$")


class JobStatus(str, enum.Enum):
    """ray.job_submission.JobStatus. Trainyard's STARTING is PENDING here; RESTARTING and
    STOPPING are RUNNING (the job still holds workers)."""
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    STOPPED = "STOPPED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"

    def __str__(self):
        return self.value

    def is_terminal(self):
        return self.value in TERMINAL_JOB_STATUSES


_STATUS = {JOB_PENDING: JobStatus.PENDING, JOB_STARTING: JobStatus.PENDING,
           JOB_RUNNING: JobStatus.RUNNING, JOB_RESTARTING: JobStatus.RUNNING,
           JOB_STOPPING: JobStatus.RUNNING}


def job_status(status):
    """The JobStatus of a Trainyard job status."""
    return _STATUS.get(status) or JobStatus(status)


@dataclass
class JobDetails:
    """ray.job_submission.JobDetails: submission_id (and job_id, the same), status, entrypoint,
    message, start_time / end_time (ms since the epoch, or None), metadata, runtime_env."""
    submission_id: str
    status: JobStatus
    entrypoint: Any = None
    message: Optional[str] = None
    start_time: Optional[int] = None
    end_time: Optional[int] = None
    metadata: Dict[str, str] = field(default_factory=dict)
    runtime_env: Dict[str, Any] = field(default_factory=dict)
    error_type: Optional[str] = None
    type: str = "SUBMISSION"

    @property
    def job_id(self):
        return self.submission_id


JobInfo = JobDetails  # Ray's older name


def _ms(text):
    """Milliseconds since the epoch of an ISO 8601 time, or None."""
    if not text:
        return None
    from datetime import datetime
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def job_number(job_id):
    """The job's number from a submission id: "42", "raysubmit_42" or 42."""
    if isinstance(job_id, int) and not isinstance(job_id, bool):
        return job_id
    m = _ID.match(str(job_id))
    if not m:
        raise ValueError(f"{job_id!r} is not a Trainyard submission id (the job's number, "
                         "e.g. '42' or 'raysubmit_42')")
    return int(m.group(1))


class JobSubmissionClient(Client):
    """ray.job_submission.JobSubmissionClient(address): submit_job, get_job_status,
    get_job_info, list_jobs, get_job_logs, tail_job_logs, stop_job, delete_job. Errors of the
    server raise TrainyardAPIError (a RuntimeError, as Ray's)."""

    def submit_job(self, spec=None, *, entrypoint=None, runtime_env=None, metadata=None,
                   submission_id=None, job_id=None, entrypoint_num_cpus=None,
                   entrypoint_num_gpus=None, working_dir=None, name=None, num_workers=1,
                   env=None, **fields):
        """submit_job(entrypoint="python3 train.py", runtime_env={"working_dir": "./",
        "env_vars": {...}}, metadata={...}): the working directory is packed and uploaded as
        fit() does it. Returns the submission id (a string). Trainyard's own spec dict, or
        working_dir= / name= / num_workers= / env=, work too."""
        if submission_id is not None or job_id is not None:
            raise ValueError("Trainyard chooses submission ids (the job's number): leave "
                             "submission_id out and use the one submit_job returns")
        env = dict(env or {})
        runtime_env = dict(runtime_env or {})
        unknown = sorted(set(runtime_env) - set(RUNTIME_ENV_KEYS))
        if unknown:
            raise ValueError("runtime_env: " + ", ".join(repr(k) for k in unknown)
                             + " not supported (supported: working_dir, env_vars); packages "
                             "come from the nodes' Python")
        if runtime_env.get("env_vars") is not None:
            ev = runtime_env["env_vars"]
            if not isinstance(ev, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                   for k, v in ev.items()):
                raise TypeError("runtime_env['env_vars'] must be a dict of str -> str")
            env.update(ev)
        wd = runtime_env.get("working_dir", working_dir)
        if spec is None:
            if entrypoint is None:
                raise ValueError("submit_job needs an entrypoint")
            spec = {"name": name or "job", "entrypoint": entrypoint,
                    "scaling_config": {"num_workers": num_workers}}
            spec.update(fields)
        else:
            spec = dict(spec)
        res = {}
        if entrypoint_num_cpus:
            res["CPU"] = entrypoint_num_cpus
        if entrypoint_num_gpus:
            res["GPU"] = entrypoint_num_gpus
        if res:
            sc = spec.setdefault("scaling_config", {})
            sc.setdefault("resources_per_worker", {}).update(res)
            if entrypoint_num_gpus:
                sc["use_gpu"] = True
        if env:
            spec["env"] = dict(spec.get("env") or {}, **env)
        if metadata:
            spec["metadata"] = {str(k): str(v) for k, v in metadata.items()}
        if wd is not None:
            if "://" in str(wd) or not os.path.isdir(wd):
                raise ValueError(f"runtime_env working_dir {wd!r} is not a local directory "
                                 "(remote URIs are not supported)")
            from .train._pack import DEFAULT_MAX_BYTES
            from .train._trainer import _code_package
            spec.pop("working_dir", None)
            spec["code_package"] = _code_package(self, os.path.abspath(wd),
                                                 DEFAULT_MAX_BYTES)[0]
        return str(super().submit_job(spec))

    def get_job(self, job_id):
        """The job as the server has it (a dict)."""
        return super().get_job(job_number(job_id))

    def get_job_info(self, job_id):
        """The job's JobDetails."""
        return self._details(self.get_job(job_id))

    def get_job_status(self, job_id):
        """The job's JobStatus."""
        return job_status(self.get_job(job_id)["status"])

    def list_jobs(self, status=None, limit=None):
        """Every job this user may see, as JobDetails (newest first)."""
        return [self._details(j) for j in super().list_jobs(status, limit)]

    def get_job_logs(self, job_id, rank=None, tail=None, attempt=None):
        """The job's log so far, as text."""
        return super().get_job_logs(job_number(job_id), rank, tail, attempt)

    async def tail_job_logs(self, job_id):
        """Yields the job's new log text (whole lines) as it arrives, until the job ends."""
        jid = job_number(job_id)
        loop = asyncio.get_running_loop()
        seen, delay = {}, TAIL_POLL_MIN_S
        while True:
            job = await loop.run_in_executor(None, super().get_job, jid)
            lines = await loop.run_in_executor(None, self.get_log_lines, jid)
            several = job.get("spec", {}).get("scaling_config", {}).get("num_workers", 1) != 1
            counts, new = {}, []
            for ln in lines:
                key = (ln["attempt"], ln["rank"])
                counts[key] = counts.get(key, 0) + 1
                if counts[key] > seen.get(key, 0):
                    seen[key] = counts[key]
                    new.append((f"[rank {ln['rank']}] " if several else "") + ln["line"] + "\n")
            if new:
                yield "".join(new)
            if job["status"] in TERMINAL_JOB_STATUSES:
                return
            delay = TAIL_POLL_MIN_S if new else min(TAIL_POLL_MAX_S, delay * 1.5)
            await asyncio.sleep(delay)

    def stop_job(self, job_id):
        """Stops the job: True when it was running (or pending), False when it had ended."""
        try:
            self.request("POST", f"/api/v1/jobs/{job_number(job_id)}/stop")
        except TrainyardAPIError as e:
            if e.status == 409:
                return False
            raise
        return True

    def delete_job(self, job_id):
        """Deletes an ended job and all its data: True. A job still running raises
        TrainyardAPIError (409), as Ray refuses it."""
        self.request("DELETE", f"/api/v1/jobs/{job_number(job_id)}")
        return True

    @staticmethod
    def _details(job):
        spec = job.get("spec") or {}
        env = {}
        if spec.get("env"):
            env["env_vars"] = dict(spec["env"])
        if spec.get("code_package"):
            env["working_dir"] = spec["code_package"]
        status = job_status(job["status"])
        return JobDetails(
            submission_id=str(job["id"]), status=status, entrypoint=spec.get("entrypoint"),
            message=job.get("status_message") or (job.get("result") or {}).get("error"),
            start_time=_ms(job.get("started_at") or job.get("created_at")),
            end_time=_ms(job.get("finished_at")), metadata=dict(spec.get("metadata") or {}),
            runtime_env=env, error_type="TRAINING_FAILED" if status == JobStatus.FAILED else None)
