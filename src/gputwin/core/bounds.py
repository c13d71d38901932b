"""The largest numbers gputwin accepts from its users, chosen once for every input.

A custom resource, a policy param or a trace that carries a number beyond these bounds is refused
where it is read (the API schema carries them as `maximum`, so the API server refuses it too),
instead of failing later in the simulator (`year 318913 is out of range`), in SLURM or in memory.
Each bound is generous for a real GPU cluster and small enough that sums and products of them stay
exact in a float and inside SLURM's 32-bit fields.
"""

from __future__ import annotations

# One year: longer than any job of the Philly, Helios or Alibaba traces (the longest run ~100 days)
# and than SLURM's own longest time limit people set; also bounds waits, checkpoints and priors.
MAX_DURATION_SECONDS = 366 * 24 * 3600

# GPUs of one job: the largest training runs reported (16,384 H100s for Llama 3 405B).
MAX_JOB_GPUS = 16_384

# GPUs on one node: 8 on most servers, 16 on the largest (HGX-2); 64 leaves room for what comes.
MAX_NODE_GPUS = 64

# Attained GPU-seconds (LAS thresholds): the longest job on the largest GPU count.
MAX_GPU_SECONDS = MAX_DURATION_SECONDS * MAX_JOB_GPUS

# Job priority: Kubernetes' bound on user-defined PriorityClass values (SLURM's is 2**32 - 2).
MAX_PRIORITY = 1_000_000_000

# Finished jobs history sizing needs as evidence for a size: beyond this it never resizes.
MAX_MIN_SAMPLES = 1_000_000

# Levels of a LAS queue (Tiresias uses 2 to 4).
MAX_LAS_LEVELS = 16

# GPUs of one tenant's quota (guarantee, borrowing or lending limit): every GPU of the largest
# partition a topology may declare (100,000 nodes of 64 GPUs).
MAX_QUOTA_GPUS = 6_400_000

# Tenants' quotas in one partition, and users one quota names: more teams and people than any
# shared cluster has, and a bound on what admission looks up per job.
MAX_TENANTS = 256
MAX_TENANT_USERS = 4096

# Characters of a free-form text value (a policy param, a user or job name).
MAX_TEXT = 256

__all__ = [
    "MAX_DURATION_SECONDS",
    "MAX_GPU_SECONDS",
    "MAX_JOB_GPUS",
    "MAX_LAS_LEVELS",
    "MAX_MIN_SAMPLES",
    "MAX_NODE_GPUS",
    "MAX_PRIORITY",
    "MAX_QUOTA_GPUS",
    "MAX_TENANTS",
    "MAX_TENANT_USERS",
    "MAX_TEXT",
]
