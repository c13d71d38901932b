"""A cluster from a Helios/Philly VC table (`vc,num_nodes`): the shape the Helios simulator assumes.

Every VC becomes one partition serving task type = VC name, with `num_nodes` nodes named
`{vc}-n{i:03d}` of `gpus_per_node` GPUs. Its nodes fill leaf switches `{vc}-leaf{k}` of at most
`nodes_per_switch` nodes, and every leaf hangs off one `spine` root. The overhead model is all
zeros: the Helios simulator charges nothing for spreading, and this cluster reproduces it.

Bounds: the table is a regular file (a FIFO or device is refused, not waited on) of lines of at
most MAX_LINE_CHARS characters, and its VCs hold at most MAX_NODES nodes in all, checked before
any node is laid out.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from gputwin.api.files import BoundedLines, LineTooLongError, NotRegularFileError, open_regular
from gputwin.api.names import HOST_NAME, MAX_NODES
from gputwin.api.problems import ClusterError, Problem
from gputwin.core.model import ClusterSpec, NodeSpec, PartitionSpec, SwitchSpec, TopologySpec
from gputwin.core.topology import Topology, TopologyError

SPINE = "spine"
COLUMNS = ("vc", "num_nodes")
# VC names become partition names, task types and node-name prefixes (`{vc}-n001`), so they follow
# the switch/node name rule, short enough that the names made from them stay SLURM names (<= 64).
MAX_VC_NAME = 48


def load_vc_table(path: Path, *, gpus_per_node: int, nodes_per_switch: int) -> ClusterSpec:
    """Read the VC table and lay out one partition per VC; ClusterError lists every bad row."""
    vcs = _read_rows(path)
    switches = [SwitchSpec(SPINE)]
    nodes: list[NodeSpec] = []
    partitions = []
    for vc, count in vcs.items():
        names = [f"{vc}-n{i:03d}" for i in range(count)]
        for k, start in enumerate(range(0, count, nodes_per_switch)):
            leaf = f"{vc}-leaf{k}"
            switches.append(SwitchSpec(leaf, SPINE))
            nodes += [NodeSpec(n, gpus_per_node, leaf) for n in names[start : start + nodes_per_switch]]
        partitions.append(PartitionSpec(name=vc, nodes=tuple(names), task_types=(vc,)))
    # The file's stem names the topology when it is a valid name (SLURM's files carry it).
    name = path.stem if re.fullmatch(HOST_NAME, path.stem) and len(path.stem) <= 63 else "vc-table"
    topology = TopologySpec(name=name, switches=tuple(switches), nodes=tuple(nodes))
    try:
        Topology(topology)
    except TopologyError as exc:  # cannot happen for a well-formed table; guards future layout changes
        raise ClusterError([Problem(str(path), exc.field, exc.reason)]) from None
    return ClusterSpec(topology=topology, partitions=tuple(partitions))


def _read_rows(path: Path) -> dict[str, int]:
    """`{vc: num_nodes}` in file order, or ClusterError with one `FILE:LINE: column: reason` per bad row."""
    where = str(path)
    try:
        # utf-8-sig: spreadsheets save CSVs with a byte-order mark that would glue onto "vc".
        with open_regular(path, encoding="utf-8-sig", newline="") as fh:
            return _parse(where, csv.DictReader(BoundedLines(fh)))
    except NotRegularFileError as exc:
        raise ClusterError([Problem(where, "file", f"not a regular file ({exc.kind})")]) from None
    except LineTooLongError as exc:
        raise ClusterError([Problem(f"{where}:{exc.line}", "line", exc.reason)]) from None
    except UnicodeDecodeError as exc:
        raise ClusterError([Problem(where, "encoding", f"not UTF-8 text ({exc.reason})")]) from None
    except csv.Error as exc:
        raise ClusterError([Problem(where, "csv", str(exc))]) from None


def _parse(where: str, reader: csv.DictReader[str]) -> dict[str, int]:
    header = reader.fieldnames
    if not header:
        raise ClusterError([Problem(where, "header", f"empty file; expected a header {','.join(COLUMNS)}")])
    absent = [c for c in COLUMNS if c not in header]
    if absent:
        reason = (
            f"missing column {', '.join(absent)}; expected {','.join(COLUMNS)}, got {','.join(header)[:200]}"
        )
        raise ClusterError([Problem(f"{where}:1", "header", reason)])
    vcs: dict[str, int] = {}
    first_line: dict[str, int] = {}
    problems = []
    total = 0
    for row in reader:
        at = f"{where}:{reader.line_num}"
        vc, count = (row.get("vc") or "").strip(), _count(row.get("num_nodes"))
        if not re.fullmatch(HOST_NAME, vc) or len(vc) > MAX_VC_NAME:
            problems.append(Problem(at, "vc", f"{vc!r:.80} is not a valid VC name (letters, digits, '-', '_', "
                                    f"'.', alphanumeric ends, at most {MAX_VC_NAME})"))  # fmt: skip
        elif vc in vcs:
            problems.append(Problem(at, "vc", f"{vc!r} is listed twice (first on line {first_line[vc]})"))
        if isinstance(count, str):
            problems.append(Problem(at, "num_nodes", count))
        elif total + count > MAX_NODES:
            above = f" ({total:,} on the lines above)" if total else ""
            reason = f"{count:,} nodes: a VC table holds at most {MAX_NODES:,} nodes in all{above}"
            problems.append(Problem(at, "num_nodes", reason))
            break  # the layout is refused: the lines after this one cannot fit either
        elif vc not in vcs:
            vcs[vc], first_line[vc] = count, reader.line_num
            total += count
    if problems:
        raise ClusterError(problems)
    if not vcs:
        raise ClusterError([Problem(where, "vc", "the table lists no VCs")])
    return vcs


def _count(text: str | None) -> int | str:
    """The node count, or the reason it is not one."""
    if text is None:
        return "missing"
    if len(text.strip()) > 12:  # no valid count is this long; int() of thousands of digits is slow
        return f"must be a positive integer of at most {MAX_NODES:,}, got {len(text.strip())} characters"
    try:
        value = int(text)
    except ValueError:
        return f"must be a positive integer, got {text!r}"
    return value if value >= 1 else f"must be a positive integer, got {value}"
