"""The names of Trainyard's vocabulary that the Python package uses, as common/vocab.h (the C
X-macros, the one definition) spells them. Written here by hand because the package runs from
the source tree; tests/unit/python/test_vocab.py fails when any list differs from the C one
(vocab-dump json, written at build time)."""

JOB_PENDING = "PENDING"
JOB_STARTING = "STARTING"
JOB_RUNNING = "RUNNING"
JOB_RESTARTING = "RESTARTING"
JOB_STOPPING = "STOPPING"
JOB_SUCCEEDED = "SUCCEEDED"
JOB_FAILED = "FAILED"
JOB_STOPPED = "STOPPED"
JOB_STATUSES = (JOB_PENDING, JOB_STARTING, JOB_RUNNING, JOB_RESTARTING, JOB_STOPPING,
                JOB_SUCCEEDED, JOB_FAILED, JOB_STOPPED)
TERMINAL_JOB_STATUSES = (JOB_SUCCEEDED, JOB_FAILED, JOB_STOPPED)

BACKEND_TORCH = "torch"
BACKEND_TENSORFLOW = "tensorflow"
BACKEND_NATIVE = "native"
BACKEND_NONE = "none"
BACKENDS = (BACKEND_TORCH, BACKEND_TENSORFLOW, BACKEND_NATIVE, BACKEND_NONE)

PLACEMENT_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")  # the first: default
SCORE_MAX = "max"
SCORE_MIN = "min"
CHECKPOINT_SCORE_ORDERS = (SCORE_MAX, SCORE_MIN)  # the first: default
