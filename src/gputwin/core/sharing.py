"""Fractional GPUs: jobs asking for a share of one GPU in milli-GPU (1..999), or for a MIG profile's
compute slices of one GPU (1..6 of 7), packed onto shared GPUs.

A partition's `Shares` keeps the GPUs it opened for sharing, `{(node, slot): used}`, and
which job holds which share. The ledger (`gputwin.core.ledger`) stays the truth about whole GPUs:
opening a shared GPU allocates one GPU from it, and the GPU goes back when its last share leaves,
so whole-GPU jobs never see a GPU that holds shares. `slot` numbers the shared GPUs open on one
node (the lowest number not in use: a label, not a device index). A shared GPU is opened either
for fractions (used in milli, never over 1000) or MIG-partitioned for profiles (used in compute
slices, never over 7): the two never mix on one GPU, as a MIG-enabled GPU cannot time-slice.

Placement of a share (`place`): the best-fitting open shared GPU of its kind - the most used one the
share still fits, ties to the lowest node, then the lowest slot - on a node in service (and of the job's
GPU model, if it asks for one); else one GPU chosen by the partition's placer as for a 1-GPU job.
A 7-slice profile (7g.40gb) is a whole GPU (`gpu_milli` 1000) and never comes here.

Only partitions whose jobs hold their GPUs until they end share (a preemptive queue policy counts
whole GPUs when it re-ranks, so there a share is a whole GPU, as every share was before). Quotas,
fair share and backfill's reservation count a share as one GPU (never over-committing them).

`open_area` and `used_area` integrate, over the times given, the shared GPUs open and the GPUs
their shares use (milli / 1000 each; a profile's milli is its slices' share, rounded): the
simulator's allocated and used GPU-hours of shares.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from sortedcontainers import SortedList

from gputwin.core.ledger import Ledger, OverAllocation
from gputwin.core.model import JobSpec
from gputwin.core.placement import ModelPools, Placer, Slots, place_model

WHOLE = 1000  # milli-GPU in one GPU
SLICES = 7  # compute slices of one MIG-partitioned GPU (NVIDIA A100, H100, H200, B200)
_PROFILE = re.compile(r"([1-7])g\.[1-9][0-9]{0,3}gb(\+me)?")  # NVIDIA's names: 1g.5gb, 3g.40gb, 1g.10gb+me


def profile_slices(profile: str) -> int:
    """The compute slices of a MIG profile named as NVIDIA names them (`3g.20gb`: 3); 0: not one."""
    match = _PROFILE.fullmatch(profile)
    return int(match[1]) if match else 0


def profile_milli(slices: int) -> int:
    """The milli-GPU a profile of `slices` uses: its share of the GPU's 7 slices, rounded."""
    return round(slices * WHOLE / SLICES)


def share_problem(spec: JobSpec) -> str | None:
    """Why a job's `gpu_milli` (or `gpu_profile`) cannot be served, or None (a share is of one GPU,
    1..999 milli; a profile's milli is its slices' share)."""
    if spec.gpu_profile:
        return _profile_problem(spec)
    if not 0 < spec.gpu_milli < WHOLE:
        return f"asks for {spec.gpu_milli} milli-GPU; a share is 1 to 999 (1000: whole GPUs)"
    if spec.gpus != 1:
        return f"asks for {spec.gpu_milli} milli-GPU of {spec.gpus} GPUs; a share is of one GPU"
    return None


def undeclared_profile(spec: JobSpec, profiles: Mapping[str, tuple[str, ...]]) -> str | None:
    """Why the cluster cannot serve `spec`'s MIG profile (its model's GPUs are not split into it),
    or None. The scheduler asks only when the topology declares profiles (`TopologySpec.profiles`);
    a cluster declaring none leaves the check to the API (`gputwin.api.validate`)."""
    declared = profiles.get(spec.model, ())
    if spec.gpu_profile in declared:
        return None
    return (f"asks for MIG profile {spec.gpu_profile} of GPU model {spec.model!r}, which declares "
            f"{', '.join(declared) or 'none'}")  # fmt: skip


def _profile_problem(spec: JobSpec) -> str | None:
    slices = profile_slices(spec.gpu_profile)
    if not slices:
        return f"asks for MIG profile {spec.gpu_profile!r}; a profile is named like 1g.10gb (1 to 7 slices)"
    if spec.gpus != 1:
        return f"asks for MIG profile {spec.gpu_profile} of {spec.gpus} GPUs; a profile is of one GPU"
    if spec.gpu_milli != profile_milli(slices):
        milli = profile_milli(slices)
        return f"asks for MIG profile {spec.gpu_profile} with {spec.gpu_milli} milli-GPU; it uses {milli}"
    return None


class Shares:
    """The shared GPUs of one partition and the shares on them."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.on_node: dict[int, dict[int, int]] = {}  # node -> {slot: used milli or slices}, open shared GPUs
        self.mig: set[tuple[int, int]] = set()  # (node, slot) of the open MIG-partitioned GPUs (used: slices)
        # (used, -node, -slot) per open GPU: fraction GPUs, MIG-partitioned GPUs
        self._fit: SortedList[tuple[int, int, int]] = SortedList()
        self._mig_fit: SortedList[tuple[int, int, int]] = SortedList()
        self.of_job: dict[str, tuple[int, int, int]] = {}  # job id -> (node, slot, milli or slices)
        self.used_milli = 0  # milli held by shares, all GPUs (a profile: `profile_milli`)
        self.used_slices = 0  # slices held by profiles, all GPUs
        self.open_area = 0.0  # GPU-seconds of shared GPUs open
        self.used_area = 0.0  # GPU-seconds of shares (milli / 1000 each)
        self.opened = 0  # shared GPUs opened so far
        self._since = 0.0

    @property
    def open_gpus(self) -> int:
        return len(self._fit) + len(self._mig_fit)

    def has_room(self) -> bool:
        """Some open shared GPU could take one more share (the least used one is not full)."""
        return bool(self._fit and self._fit[0][0] < WHOLE or self._mig_fit and self._mig_fit[0][0] < SLICES)

    def used(self) -> dict[tuple[int, int], int]:
        """`{(node, slot): used milli}` of every open shared GPU holding fractions."""
        return {(node, slot): used for node, slots in self.on_node.items() for slot, used in slots.items()
                if (node, slot) not in self.mig}  # fmt: skip

    def slices_used(self) -> dict[tuple[int, int], int]:
        """`{(node, slot): used slices}` of every open MIG-partitioned GPU."""
        return {key: self.on_node[key[0]][key[1]] for key in self.mig}

    def best_open(self, amount: int, nodes: frozenset[int] | None = None, mig: bool = False) -> int | None:
        """The node of the best-fitting open shared GPU for a share of `amount` (milli, or slices
        when `mig`), or None."""
        fit = self._mig_fit if mig else self._fit
        ledger = self.ledger
        i = fit.bisect_right(((SLICES if mig else WHOLE) - amount, 1, 1))  # after every GPU with room for it
        while i > 0:
            i -= 1
            node: int = -fit[i][1]
            if (nodes is None or node in nodes) and ledger.in_service(node):
                return node
        return None

    def place(self, placer: Placer, spec: JobSpec, waited: float, models: ModelPools | None) -> Slots | None:
        """Where `spec`'s share goes: `((node, 1),)`, an open shared GPU's node or a new one's; None: wait."""
        nodes = models.nodes[spec.model] if models is not None and spec.model else None
        slices = profile_slices(spec.gpu_profile) if spec.gpu_profile else 0
        node = self.best_open(slices, nodes, True) if slices else self.best_open(spec.gpu_milli, nodes)
        if node is not None:
            return ((node, 1),)
        if not self.ledger.free_gpus:
            return None
        return place_model(placer, self.ledger, 1, waited, models, spec.model)

    def take(self, job_id: str, node: int, milli: int, now: float, profile: str = "", slot: int = -1) -> None:
        """Put `job_id`'s share (`milli`, or MIG `profile`'s slices) on `node`: on its best-fitting
        open shared GPU of that kind, else on a GPU newly taken from the ledger (raises
        OverAllocation, changing nothing, if the node has none free). `slot` >= 0 names the shared
        GPU instead (an adopted share, on the GPU the live cluster put it: shares it kept apart stay
        apart, so no GPU they hold looks free); OverAllocation if the share does not fit there."""
        slices = profile_slices(profile) if profile else 0
        amount, room_of = (slices, SLICES) if slices else (milli, WHOLE)
        slots = self.on_node.get(node, {})
        if slot < 0:  # the placement path: kept free of the adopted case's test (~14 % of a take)
            room = [(used, -key) for key, used in slots.items()
                    if ((node, key) in self.mig) == bool(slices) and used + amount <= room_of]  # fmt: skip
        else:
            room = [(used, -slot) for used in (slots.get(slot),)
                    if used is not None and ((node, slot) in self.mig) == bool(slices) and used + amount <= room_of]
        if room:
            used, slot = max(room)
            slot = -slot
        elif slot in slots:
            raise OverAllocation(f"shared GPU {slot} of node {node} has no room for {amount} more")
        else:
            self.ledger.allocate(((node, 1),))
            used, slot = 0, slot if slot >= 0 else min(set(range(len(slots) + 1)) - set(slots))
            self.on_node.setdefault(node, {})
            self.opened += 1
            if slices:
                self.mig.add((node, slot))
        self._advance(now)
        self._move(node, slot, used, used + amount)
        self.used_milli += milli
        self.of_job[job_id] = (node, slot, amount)

    def give_back(self, job_id: str, now: float) -> None:
        """`job_id`'s share leaves; a shared GPU left with none goes back to the ledger."""
        entry = self.of_job.pop(job_id, None)
        if entry is None:
            raise OverAllocation(f"job {job_id!r} holds no GPU share")
        node, slot, amount = entry
        self._advance(now)
        used = self.on_node[node][slot]
        self.used_milli -= profile_milli(amount) if (node, slot) in self.mig else amount
        self._move(node, slot, used, used - amount)
        if used == amount:
            self.mig.discard((node, slot))
            self.ledger.release(((node, 1),))

    def _move(self, node: int, slot: int, before: int, after: int) -> None:
        """Shared GPU (node, slot) from `before` to `after` used (0: not open) in every index."""
        slots = self.on_node[node]
        mig = (node, slot) in self.mig
        fit = self._mig_fit if mig else self._fit
        if before:
            fit.remove((before, -node, -slot))
        if after:
            slots[slot] = after
            fit.add((after, -node, -slot))
        else:
            del slots[slot]
            if not slots:
                del self.on_node[node]
        if mig:
            self.used_slices += after - before

    def _advance(self, now: float) -> None:
        if now > self._since:
            span = now - self._since
            self.open_area += self.open_gpus * span
            self.used_area += self.used_milli * span / WHOLE
        self._since = max(self._since, now)
