"""Names and bounds of the gputwin.io/v1alpha1 API that need no pydantic: the group and version, name
patterns, node and shard bounds, and hostlist counting and expansion.

`gputwin.api.meta` builds the models' types from these and re-exports them; the trace readers and
the VC-table cluster reader (`gputwin.api.helios`) import them from here, so `gputwin simulate` of
a CSV trace on a CSV cluster loads no pydantic at all (issue 17, start-up).
"""

from __future__ import annotations

import re

import hostlist

GROUP = "gputwin.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"

# SLURM shards per GPU (NodeGroup.shardsPerGpu): finer than the twin's milli-GPU would be shards
# no fraction can use. The core has no field for it: convert carries it to nodes as SHARDS_LABEL.
MAX_SHARDS_PER_GPU = 1000
SHARDS_LABEL = "gputwin.io/shards-per-gpu"
# Switch and node names end up as Kubernetes label values and SLURM names: same character set.
HOST_NAME = r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
# A task type routes a job (GPUJob spec.taskType, `sbatch --comment=task:<type>`) to the partition
# serving it. It is written into SLURM's job_submit.lua as a string literal, so the pattern is the
# SLURM renderer's name rule: no quote, bracket, space, `#`, `,` or newline can reach the script.
TASK_TYPE = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$"
TASK_TYPE_RULE = "1-64 of A-Z a-z 0-9 _ . -, not starting with . or -"
# A GPUPartition's `taskTypes` may also hold this alone: it catches jobs no other partition serves.
CATCH_ALL = "*"

# The most nodes one hostlist (or one VC table, or one trace record) may name: a hundred times the
# largest cluster in the shared traces, and small enough that expanding it takes well under a second.
# Hostlists are counted (arithmetically, from their ranges) before they are expanded.
MAX_NODES = 100_000
_MAX_HOSTLIST_CHARS = 1 << 16  # text of one hostlist; a range bound has at most _RANGE_DIGITS digits
_RANGE_DIGITS = 18
_RANGE = re.compile(r"([0-9]+)(?:-([0-9]+))?", re.ASCII)
_BRACKETS = re.compile(r"\[([^\]]*)\]")


def count_hostlist(text: str) -> int | None:
    """How many names `text` expands to (duplicates included), without expanding it.

    Follows python-hostlist's grammar (top-level commas split parts; each `[...]` group of a part
    multiplies its count by the group's size). None when the text is not a hostlist that grammar
    reads (the expansion then says why); a count above MAX_NODES may be reported as MAX_NODES + 1.
    """
    if len(text) > _MAX_HOSTLIST_CHARS:
        return MAX_NODES + 1
    total, depth = 0, 0
    part: list[str] = []
    for char in text + ",":
        if char == "," and depth == 0:
            size = _count_part("".join(part))
            if size is None:
                return None
            total, part = min(total + size, MAX_NODES + 1), []
            continue
        part.append(char)
        depth += (char == "[") - (char == "]")
        if not 0 <= depth <= 1:
            return None
    return None if depth else total


def _count_part(part: str) -> int | None:
    if not part:
        return 0
    size = 1
    for group in _BRACKETS.findall(part):
        ranges = 0
        for item in group.split(","):
            match = _RANGE.fullmatch(item)
            if match is None:
                return None
            low, high = match.group(1), match.group(2) or match.group(1)
            if max(len(low), len(high)) > _RANGE_DIGITS:
                return MAX_NODES + 1
            if int(high) < int(low):
                return None
            ranges += int(high) - int(low) + 1
        size = min(size * ranges, MAX_NODES + 1)
    return size


def _show(text: str) -> str:
    """A hostlist for an error message, cut short when long."""
    return repr(text) if len(text) <= 80 else f"{text[:60]!r}... ({len(text)} characters)"


def expand_hostlist(text: str) -> list[str]:
    """Expand a SLURM hostlist (`gpu[001-004],cpu7`) in declaration order; ValueError if it is bad.

    At most MAX_NODES names: the count is checked before anything is expanded.
    """
    count = count_hostlist(text)
    if count is not None and count > MAX_NODES:
        raise ValueError(f"hostlist {_show(text)} names more than {MAX_NODES:,} nodes")
    try:
        names: list[str] = hostlist.expand_hostlist(text, allow_duplicates=True)
    except hostlist.BadHostlist as exc:
        raise ValueError(f"bad hostlist {_show(text)}: {exc}") from None
    seen: set[str] = set()
    for name in names:
        if not re.fullmatch(HOST_NAME, name):
            raise ValueError(f"hostlist {_show(text)} yields {name!r}, which is not a valid node name")
        if name in seen:
            raise ValueError(f"hostlist {_show(text)} names {name!r} twice")
        seen.add(name)
    if not names:
        raise ValueError("hostlist is empty")
    return names
