"""trainyard.job_submission (ray.job_submission): JobSubmissionClient for notebooks and
scripts: submit_job, get_job_status, get_job_logs, stop_job, list_jobs."""

from .train._client import Client, JobSubmissionClient, TrainyardAPIError

__all__ = ["Client", "JobSubmissionClient", "TrainyardAPIError"]
