"""Every user mistake becomes a ClusterError whose lines read `FILE[:docN]: field.path: reason`."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from gputwin.api.loader import load_cluster, load_documents
from gputwin.api.problems import ClusterError, Problem

TOPOLOGY = """\
apiVersion: gputwin.io/v1alpha1
kind: SwitchTopology
metadata: {name: t}
spec:
  switches: [{name: spine}, {name: leaf0, parent: spine}, {name: leaf1, parent: spine}]
  nodeGroups:
    - {switch: leaf0, nodes: "n[1-2]", labels: {pool: a}}
    - {switch: leaf1, nodes: "n[3-4]", labels: {pool: b}}
"""
PARTITION = """\
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {name: a}
spec: {topology: t, taskTypes: [a], nodes: "n[1-2]", policy: p}
"""
POLICY = """\
apiVersion: gputwin.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: p}
spec: {queue: {policy: sjf}}
"""
VALID = [TOPOLOGY, PARTITION, POLICY]


def write(tmp_path: Path, documents: list[str], name: str = "cluster.yaml") -> Path:
    path = tmp_path / name
    path.write_text("---\n".join(documents))
    return path


def edit(index: int, old: str, new: str) -> list[str]:
    """The valid cluster with one document changed."""
    docs = list(VALID)
    assert old in docs[index], old
    docs[index] = docs[index].replace(old, new)
    return docs


YAML_CASES = {
    # syntax
    "yaml-syntax": (
        [TOPOLOGY, "kind: GPUPartition\nmetadata:\n  name: a\n   bad: x\n"],
        "{f}:doc2: line 13, column 7: mapping values are not allowed "
        + ("in this context" if yaml.__with_libyaml__ else "here"),  # libyaml's wording, else PyYAML's
    ),
    "yaml-duplicate-key": (
        [TOPOLOGY, "kind: GPUPartition\nkind: GPUJob\n"],
        "{f}:doc2: line 11, column 1: found duplicate key 'kind'",
    ),
    "not-a-mapping": (
        [TOPOLOGY, "- a\n- b\n"],
        "{f}:doc2: document: expected a mapping (apiVersion, kind, ...), got list",
    ),
    # kinds and schema
    "unknown-kind": (
        [TOPOLOGY, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"],
        (
            "{f}:doc2: kind: unknown kind 'ConfigMap'; expected one of GPUJob, GPUPartition, SchedulingPolicy, "
            "SwitchTopology, TraceReplay"
        ),
    ),
    "missing-kind": (
        [TOPOLOGY, "apiVersion: v1\n"],
        (
            "{f}:doc2: kind: missing; expected one of GPUJob, GPUPartition, "
            "SchedulingPolicy, SwitchTopology, TraceReplay"
        ),
    ),
    "wrong-api-version": (
        edit(2, "gputwin.io/v1alpha1", "gputwin.io/v1"),
        "{f}:doc3: apiVersion: Input should be 'gputwin.io/v1alpha1'",
    ),
    "typo-field": (
        edit(0, '{switch: leaf1, nodes: "n[3-4]"', '{switch: leaf1, gpusPerNod: 4, nodes: "n[3-4]"'),
        "{f}:doc1: spec.nodeGroups[1].gpusPerNod: Extra inputs are not permitted",
    ),
    "several-errors-one-per-line": (
        edit(2, "{queue: {policy: sjf}}", "{queue: {policy: lifo}, placement: {maxWaitSeconds: -1}}"),
        (
            "{f}:doc3: spec.queue.policy: Input should be 'fifo', 'sjf', 'srtf', 'las', 'qssf' or 'priority'\n"
            "{f}:doc3: spec.placement.maxWaitSeconds: Input should be greater than or equal to 0"
        ),
    ),
    "string-is-not-a-number": (
        edit(0, '"n[3-4]", labels', '"n[3-4]", gpusPerNode: "8", labels'),
        "{f}:doc1: spec.nodeGroups[1].gpusPerNode: Input should be a valid integer",
    ),
    "label-keys-are-quoted": (
        edit(0, "{pool: b}", "{gputwin.io/pool: true}"),
        '{f}:doc1: spec.nodeGroups[1].labels["gputwin.io/pool"]: Input should be a valid string',
    ),
    "dns-name": (
        edit(1, "{name: a}", "{name: Train_A}"),
        (
            "{f}:doc2: metadata.name: 'Train_A' is not a valid DNS-1123 subdomain "
            "(lowercase letters, digits, '-' and '.'; alphanumeric ends)"
        ),
    ),
    "nodes-and-selector": (
        edit(1, 'nodes: "n[1-2]"', 'nodes: "n[1-2]", nodeSelector: {matchLabels: {pool: a}}'),
        "{f}:doc2: spec: set exactly one of nodes or nodeSelector",
    ),
    "reserved-param": (
        edit(2, "{queue: {policy: sjf}}", "{params: {max_wait: 3, window: 5}}"),
        "{f}:doc3: spec.params: may not set max_wait: use the typed fields",
    ),
    "qssf-prior-not-seconds": (
        edit(2, "{queue: {policy: sjf}}", "{queue: {policy: qssf}, params: {qssf_prior: soon}}"),
        "{f}:doc3: spec.params: qssf_prior: expected seconds (a number >= 0), got 'soon'",
    ),
    "qssf-prior-negative": (
        edit(2, "{queue: {policy: sjf}}", "{queue: {policy: qssf}, params: {qssf_prior: -60}}"),
        "{f}:doc3: spec.params: qssf_prior: expected seconds (a number >= 0), got -60",
    ),
    "qssf-prior-beyond-a-year": (
        edit(2, "{queue: {policy: sjf}}", "{queue: {policy: qssf}, params: {qssf_prior: 1000000000}}"),
        "{f}:doc3: spec.params: qssf_prior: expected seconds (a number >= 0), got 1000000000: at most 31622400",
    ),
    "unknown-param": (
        edit(2, "{queue: {policy: sjf}}", "{queue: {policy: qssf}, params: {qssf_priorr: 100}}"),
        "{f}:doc3: spec.params: qssf_priorr: unknown param; known: las_thresholds, min_samples, qssf_prior",
    ),
    "las-thresholds-not-numbers": (
        edit(2, "{queue: {policy: sjf}}", "{queue: {policy: las}, params: {las_thresholds: '60,soon'}}"),
        "{f}:doc3: spec.params: las_thresholds: expected GPU-seconds (a number >= 0), got 'soon'",
    ),
    "min-samples-fraction": (
        edit(2, "{queue: {policy: sjf}}", "{sizing: {policy: history}, params: {min_samples: 2.5}}"),
        "{f}:doc3: spec.params: min_samples: expected a whole number of jobs, got 2.5",
    ),
    "two-partitions-one-task-type": (
        [*VALID, PARTITION.replace("{name: a}", "{name: b}").replace('"n[1-2]"', '"n[3-4]"')],
        ("{f}:doc4: spec.taskTypes[0]: task type 'a' is served by GPUPartition 'b' here and by GPUPartition 'a' ({f}:doc2); "
        "one partition per task type"),
    ),
    "two-catch-alls": (
        [
            TOPOLOGY,
            PARTITION.replace("[a]", '["*"]'),
            POLICY,
            PARTITION.replace("{name: a}", "{name: b}").replace('"n[1-2]"', '"n[3-4]"').replace("[a]", '[b, "*"]'),
        ],
        ("{f}:doc4: spec.taskTypes[1]: the catch-all '*' is served by GPUPartition 'b' here and by GPUPartition 'a' ({f}:doc2); "
        "one partition per task type"),
    ),
    "task-type-with-newline": (
        edit(1, "taskTypes: [a]", 'taskTypes: ["a\\nb"]'),
        ("{f}:doc2: spec.taskTypes[0]: 'a\\nb' is not a valid task type (1-64 of A-Z a-z 0-9 _ . -, not "
        "starting with . or -) or '*' alone"),
    ),
    "non-scalar-param": (
        edit(2, "{queue: {policy: sjf}}", "{params: {thresholds: [1, 2]}}"),
        "{f}:doc3: spec.params.thresholds: must be a string, number or boolean",
    ),
    "param-text-too-long": (
        edit(2, "{queue: {policy: sjf}}", "{params: {las_thresholds: '" + "1" * 300 + "'}}"),
        "{f}:doc3: spec.params.las_thresholds: at most 256 characters",
    ),
    "param-number-of-300-digits": (
        edit(2, "{queue: {policy: sjf}}", "{params: {las_thresholds: " + "1" * 300 + "}}"),
        ("{f}:doc3: spec.params: las_thresholds: expected GPU-seconds (a number >= 0), got "
        "1.1111111111111112e+299: at most 518101401600"),  # read as a float: no digit limit raises
    ),
    # hostlists
    "bad-hostlist": (
        edit(0, '"n[3-4]"', '"n[3-"'),
        "{f}:doc1: spec.nodeGroups[1].nodes: bad hostlist 'n[3-': unbalanced brackets",
    ),
    "hostlist-repeats-a-node": (
        edit(1, '"n[1-2]"', '"n[1-2],n1"'),
        "{f}:doc2: spec.nodes: hostlist 'n[1-2],n1' names 'n1' twice",
    ),
    "hostlist-bad-node-name": (
        edit(0, '"n[3-4]"', '"n 3"'),
        "{f}:doc1: spec.nodeGroups[1].nodes: hostlist 'n 3' yields 'n 3', which is not a valid node name",
    ),
    # cross-object references
    "missing-topology-ref": (
        edit(1, "topology: t", "topology: other"),
        "{f}:doc2: spec.topology: unknown SwitchTopology 'other'; declared: 't'",
    ),
    "missing-policy-ref": (
        edit(1, "policy: p", "policy: q"),
        "{f}:doc2: spec.policy: unknown SchedulingPolicy 'q'; declared: 'p'",
    ),
    "node-in-two-partitions": (
        [*VALID, PARTITION.replace("{name: a}", "{name: b}").replace('"n[1-2]"', '"n[2-3]"').replace("[a]", "[b]")],
        "{f}:doc4: spec.nodes: node 'n2' already in GPUPartition 'a'",
    ),
    "selector-overlaps": (
        [
            *VALID,
            PARTITION.replace("{name: a}", "{name: b}").replace("[a]", "[b]").replace(
                'nodes: "n[1-2]"', "nodeSelector: {matchLabels: {pool: a}}"
            ),
        ],
        "{f}:doc4: spec.nodeSelector.matchLabels: 2 nodes 'n1', 'n2' already in GPUPartition 'a'",
    ),
    "selector-matches-nothing": (
        edit(1, 'nodes: "n[1-2]"', "nodeSelector: {matchLabels: {pool: c}}"),
        "{f}:doc2: spec.nodeSelector.matchLabels: selects no nodes of SwitchTopology 't'",
    ),
    "partition-node-not-in-topology": (
        edit(1, '"n[1-2]"', '"n[1-9]"'),
        "{f}:doc2: spec.nodes: 5 nodes 'n5', 'n6', 'n7' and 2 more not in SwitchTopology 't'",
    ),
    "duplicate-name": (
        [*VALID, POLICY],
        "{f}:doc4: metadata.name: SchedulingPolicy 'p' is already declared in {f}:doc3",
    ),
    "no-topology": ([PARTITION, POLICY], "{f}: kind: no SwitchTopology found; exactly one is required"),
    "two-topologies": (
        [*VALID, TOPOLOGY.replace("{name: t}", "{name: u}")],
        "{f}:doc4: kind: a second SwitchTopology (the first is in {f}:doc1); exactly one is allowed",
    ),
    # the switch tree, as gputwin.core.topology reports it
    "two-roots": (
        edit(0, "{name: leaf1, parent: spine}", "{name: leaf1}"),
        "{f}:doc1: spec.switches: expected one root switch, found 2: spine, leaf1",
    ),
    "unknown-parent": (
        edit(0, "{name: leaf1, parent: spine}", "{name: leaf1, parent: spime}"),
        "{f}:doc1: spec.switches[2].parent: unknown switch 'spime'",
    ),
    "node-on-unknown-switch": (
        edit(0, "{switch: leaf1,", "{switch: leaf9,"),
        "{f}:doc1: spec.nodeGroups[1].switch: node 'n3' hangs off unknown switch 'leaf9'",
    ),
    "node-on-spine": (
        edit(0, "{switch: leaf1,", "{switch: spine,"),
        "{f}:doc1: spec.nodeGroups[1].switch: node 'n3' hangs off 'spine', which is not a leaf switch",
    ),
    "node-in-two-groups": (
        edit(0, '"n[3-4]"', '"n[2-4]"'),
        "{f}:doc1: spec.nodeGroups[1].nodes: node 'n2' is declared twice",
    ),
    # files
    "empty-file": ([""], "{f}: documents: no YAML documents found"),
    "comments-only": (["# nothing here\n"], "{f}: documents: no YAML documents found"),
}


@pytest.mark.parametrize(("documents", "expected"), YAML_CASES.values(), ids=YAML_CASES.keys())
def test_yaml_mistakes(tmp_path: Path, documents: list[str], expected: str) -> None:
    path = write(tmp_path, documents)
    with pytest.raises(ClusterError) as caught:
        load_cluster(path)
    assert str(caught.value) == expected.format(f=path)


CSV_CASES = {
    "empty": ("", "{f}: header: empty file; expected a header vc,num_nodes"),
    "header": (
        "name,nodes\na,1\n",
        "{f}:1: header: missing column vc, num_nodes; expected vc,num_nodes, got name,nodes",
    ),
    "no-rows": ("vc,num_nodes\n", "{f}: vc: the table lists no VCs"),
    "bad-rows": (
        "vc,num_nodes\nok,4\nx,four\ny,0\nok,2\nbad vc,1\nz\n",
        (
            "{f}:3: num_nodes: must be a positive integer, got 'four'\n"
            "{f}:4: num_nodes: must be a positive integer, got 0\n"
            "{f}:5: vc: 'ok' is listed twice (first on line 2)\n"
            "{f}:6: vc: 'bad vc' is not a valid VC name (letters, digits, '-', '_', '.', alphanumeric ends, at most 48)\n"
            "{f}:7: num_nodes: missing"
        ),
    ),
}


@pytest.mark.parametrize(("text", "expected"), CSV_CASES.values(), ids=CSV_CASES.keys())
def test_vc_table_mistakes(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "vcs.csv"
    path.write_text(text)
    with pytest.raises(ClusterError) as caught:
        load_cluster(path)
    assert str(caught.value) == expected.format(f=path)


def test_vc_table_with_bom_and_extra_columns(tmp_path: Path) -> None:
    path = tmp_path / "vcs.csv"
    path.write_text("\ufeffvc,num_nodes,comment\nvcA,3,x\n", encoding="utf-8")
    cluster = load_cluster(path, nodes_per_switch=2)
    assert cluster.partitions[0].nodes == ("vcA-n000", "vcA-n001", "vcA-n002")
    assert [n.switch for n in cluster.topology.nodes] == ["vcA-leaf0", "vcA-leaf0", "vcA-leaf1"]


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda p: p / "missing.yaml", "{p}/missing.yaml: path: no such file"),
        (lambda p: p, "{p}: path: directory holds no *.yaml or *.yml files"),
        (lambda p: p / "missing.csv", "{p}/missing.csv: path: no such file"),
    ],
    ids=["missing-file", "empty-directory", "missing-csv"],
)
def test_path_mistakes(tmp_path: Path, make: Callable[[Path], Path], expected: str) -> None:
    with pytest.raises(ClusterError) as caught:
        load_cluster(make(tmp_path))
    assert str(caught.value) == expected.format(p=tmp_path)


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"kind: \xff\xfe\n")
    with pytest.raises(ClusterError, match=r"bin.yaml: encoding: not UTF-8 text"):
        load_documents(path)


def test_directory_errors_name_the_file_and_document(tmp_path: Path) -> None:
    write(tmp_path, [TOPOLOGY], "a-topology.yaml")
    bad = write(tmp_path, [POLICY, PARTITION.replace("policy: p", "policy: nope")], "b-partitions.yml")
    (tmp_path / "notes.txt").write_text("not yaml: [")
    with pytest.raises(ClusterError) as caught:
        load_cluster(tmp_path)
    assert str(caught.value) == f"{bad}:doc2: spec.policy: unknown SchedulingPolicy 'nope'; declared: 'p'"
    assert caught.value.problems == (
        Problem(f"{bad}:doc2", "spec.policy", "unknown SchedulingPolicy 'nope'; declared: 'p'"),
    )


def test_problems_from_all_documents_are_reported_together(tmp_path: Path) -> None:
    docs = [TOPOLOGY, PARTITION.replace("taskTypes: [a]", "taskTypes: []"), POLICY.replace("sjf", "x")]
    with pytest.raises(ClusterError) as caught:
        load_cluster(write(tmp_path, docs))
    assert [(p.document.rsplit(":", 1)[1], p.field) for p in caught.value.problems] == [
        ("doc2", "spec.taskTypes"),
        ("doc3", "spec.queue.policy"),
    ]


def test_cluster_error_is_a_value_error_and_pickles() -> None:
    error = ClusterError([Problem("f.yaml:doc1", "spec", "bad")])
    assert isinstance(error, ValueError)
    again = pickle.loads(pickle.dumps(error))
    assert (str(again), again.problems) == ("f.yaml:doc1: spec: bad", error.problems)


def test_dates_stay_strings_and_empty_documents_are_skipped(tmp_path: Path) -> None:
    replay = (
        "apiVersion: gputwin.io/v1alpha1\nkind: TraceReplay\nmetadata: {name: r, namespace: default}\n"
        "spec: {trace: {sacct: {start: 2024-05-01}}, topology: t}\n"
    )
    (resource,) = load_documents(write(tmp_path, ["", replay, "# trailing\n"]))
    assert resource.spec.trace.sacct.start == "2024-05-01"  # type: ignore[union-attr]


def test_load_cluster_ignores_workload_kinds(tmp_path: Path) -> None:
    job = "apiVersion: gputwin.io/v1alpha1\nkind: GPUJob\nmetadata: {name: j}\nspec: {taskType: a, gpus: 2}\n"
    cluster = load_cluster(write(tmp_path, [*VALID, job]))
    assert [(p.name, p.nodes, p.policy.queue) for p in cluster.partitions] == [("a", ("n1", "n2"), "sjf")]
