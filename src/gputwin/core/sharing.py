"""Fractional GPUs: jobs asking for a share of one GPU in milli-GPU (1..999), packed onto shared GPUs.

A partition's `Shares` keeps the GPUs it opened for sharing, `{(node, slot): used milli}`, and
which job holds which share. The ledger (`gputwin.core.ledger`) stays the truth about whole GPUs:
opening a shared GPU allocates one GPU from it, and the GPU goes back when its last share leaves,
so whole-GPU jobs never see a GPU that holds shares. `slot` numbers the shared GPUs open on one
node (the lowest number not in use: a label, not a device index). No GPU ever holds over 1000.

Placement of a share (`place`): the best-fitting open shared GPU - the most used one the share
still fits, ties to the lowest node, then the lowest slot - on a node in service (and of the job's
GPU model, if it asks for one); else one GPU chosen by the partition's placer as for a 1-GPU job.

Only partitions whose jobs hold their GPUs until they end share (a preemptive queue policy counts
whole GPUs when it re-ranks, so there a share is a whole GPU, as every share was before). Quotas,
fair share and backfill's reservation count a share as one GPU (never over-committing them).

`open_area` and `used_area` integrate, over the times given, the shared GPUs open and the GPUs
their shares use (milli / 1000 each): the simulator's allocated and used GPU-hours of shares.
"""

from __future__ import annotations

from sortedcontainers import SortedList

from gputwin.core.ledger import Ledger, OverAllocation
from gputwin.core.model import JobSpec
from gputwin.core.placement import ModelPools, Placer, Slots, place_model

WHOLE = 1000  # milli-GPU in one GPU


def share_problem(spec: JobSpec) -> str | None:
    """Why a job's `gpu_milli` cannot be served, or None (a share is of one GPU, 1..999 milli)."""
    if not 0 < spec.gpu_milli < WHOLE:
        return f"asks for {spec.gpu_milli} milli-GPU; a share is 1 to 999 (1000: whole GPUs)"
    if spec.gpus != 1:
        return f"asks for {spec.gpu_milli} milli-GPU of {spec.gpus} GPUs; a share is of one GPU"
    return None


class Shares:
    """The shared GPUs of one partition and the shares on them."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.on_node: dict[int, dict[int, int]] = {}  # node -> {slot: used milli} of its open shared GPUs
        self._fit: SortedList[tuple[int, int, int]] = SortedList()  # (used, -node, -slot) per open GPU
        self.of_job: dict[str, tuple[int, int, int]] = {}  # job id -> (node, slot, milli)
        self.used_milli = 0  # milli held by shares, all GPUs
        self.open_area = 0.0  # GPU-seconds of shared GPUs open
        self.used_area = 0.0  # GPU-seconds of shares (milli / 1000 each)
        self.opened = 0  # shared GPUs opened so far
        self._since = 0.0

    @property
    def open_gpus(self) -> int:
        return len(self._fit)

    def used(self) -> dict[tuple[int, int], int]:
        """`{(node, slot): used milli}` of every open shared GPU."""
        return {(node, slot): milli for node, slots in self.on_node.items() for slot, milli in slots.items()}

    def best_open(self, milli: int, nodes: frozenset[int] | None = None) -> int | None:
        """The node of the best-fitting open shared GPU for a `milli` share, or None."""
        fit = self._fit
        ledger = self.ledger
        i = fit.bisect_right((WHOLE - milli, 1, 1))  # after every GPU with room for it
        while i > 0:
            i -= 1
            node = -fit[i][1]
            if (nodes is None or node in nodes) and ledger.in_service(node):
                return node
        return None

    def place(self, placer: Placer, spec: JobSpec, waited: float, models: ModelPools | None) -> Slots | None:
        """Where `spec`'s share goes: `((node, 1),)`, an open shared GPU's node or a new one's; None: wait."""
        nodes = models.nodes[spec.model] if models is not None and spec.model else None
        node = self.best_open(spec.gpu_milli, nodes)
        if node is not None:
            return ((node, 1),)
        if not self.ledger.free_gpus:
            return None
        return place_model(placer, self.ledger, 1, waited, models, spec.model)

    def take(self, job_id: str, node: int, milli: int, now: float) -> None:
        """Put `job_id`'s share on `node`: on its best-fitting open shared GPU, else on a GPU newly
        taken from the ledger (raises OverAllocation, changing nothing, if the node has none free)."""
        slots = self.on_node.get(node, {})
        room = [(used, -slot) for slot, used in slots.items() if used + milli <= WHOLE]
        if room:
            used, slot = max(room)
            slot = -slot
        else:
            self.ledger.allocate(((node, 1),))
            used, slot = 0, min(set(range(len(slots) + 1)) - set(slots))
            self.on_node.setdefault(node, {})
            self.opened += 1
        self._advance(now)
        self._move(node, slot, used, used + milli)
        self.of_job[job_id] = (node, slot, milli)

    def give_back(self, job_id: str, now: float) -> None:
        """`job_id`'s share leaves; a shared GPU left with none goes back to the ledger."""
        entry = self.of_job.pop(job_id, None)
        if entry is None:
            raise OverAllocation(f"job {job_id!r} holds no GPU share")
        node, slot, milli = entry
        self._advance(now)
        used = self.on_node[node][slot]
        self._move(node, slot, used, used - milli)
        if used == milli:
            self.ledger.release(((node, 1),))

    def _move(self, node: int, slot: int, before: int, after: int) -> None:
        """Shared GPU (node, slot) from `before` to `after` used milli (0: not open) in every index."""
        slots = self.on_node[node]
        if before:
            self._fit.remove((before, -node, -slot))
        if after:
            slots[slot] = after
            self._fit.add((after, -node, -slot))
        else:
            del slots[slot]
            if not slots:
                del self.on_node[node]
        self.used_milli += after - before

    def _advance(self, now: float) -> None:
        if now > self._since:
            span = now - self._since
            self.open_area += len(self._fit) * span
            self.used_area += self.used_milli * span / WHOLE
        self._since = max(self._since, now)
