"""Every shell command of README.md, run as README shows it (issue 18 item 4: a README that holds).

The commands are read doctest-style from README's ```sh blocks: a trailing `\\` continues a line,
`#` starts a comment, `;` and `&&` separate commands. Each command is either RUN here — the
block's commands in order, in a fresh folder (so `out/…`, `rendered/` and the emulator's `.gputwin`
land under tmp_path), with the repository's own paths (`manifests/…`, `../shared/…`) resolved to
this checkout, in-process through click's CliRunner, checked for exit status 0 and for what README
says it prints or writes — or listed in NOT_RUN with the reason (a live Kubernetes or SLURM cluster,
Docker, the install itself). A README command in neither table fails
`test_every_readme_command_is_run_or_listed`, so README and this file cannot drift apart.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result
from gputwin.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
REPO_PREFIXES = ("manifests/", "crds/", "scripts/", "src/", "tests/", "../shared/")
SEPARATORS = (";", "&&")


@dataclass(frozen=True)
class Command:
    line: int  # README line the command starts on
    text: str  # the command as README shows it, continuations joined, comment dropped
    argv: tuple[str, ...]


@dataclass(frozen=True)
class Block:
    line: int
    section: str
    commands: tuple[Command, ...]


def sh_blocks(text: str) -> list[Block]:
    """The ```sh blocks of a Markdown text, each split into commands."""
    blocks, section, fence, start, body = [], "", "", 0, []
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not fence and stripped.startswith("```"):
            fence, start, body = stripped[3:] or "text", number, []
        elif fence and stripped == "```":
            if fence == "sh":
                blocks.append(Block(start, section, tuple(commands(body))))
            fence = ""
        elif fence:
            body.append((number, raw))
        elif raw.startswith("#"):
            section = raw.lstrip("# ").strip()
    assert not fence, f"README.md:{start}: unclosed ``` block"
    return blocks


def commands(body: list[tuple[int, str]]) -> list[Command]:
    found, pending, first = [], "", 0
    for number, raw in body:
        first = first or number
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        logical, pending = pending + raw, ""
        lexer = shlex.shlex(logical, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split, lexer.commenters = True, "#"
        current: list[str] = []
        for token in [*lexer, ";"]:
            if token in SEPARATORS:
                if current:
                    found.append(Command(first, shlex.join(current), tuple(current)))
                current = []
            else:
                current.append(token)
        first = 0
    return found


BLOCKS = sh_blocks(README.read_text())
SHARED = ROOT.parent / "shared"


# --- what each command that runs here must print or write ------------------------------------------


def readme_output_after(marker: str) -> list[str]:
    """The lines of the plain ``` block README shows right after the sentence ending in `marker`."""
    text = README.read_text()
    at = text.index(marker)
    block = re.search(r"```\n(.*?)```", text[at:], re.S)
    assert block, f"README: no output block after {marker!r}"
    return block.group(1).strip().splitlines()


def readme_phrase(pattern: str) -> str:
    match = re.search(pattern, README.read_text())
    assert match, f"README no longer says {pattern!r}"
    return match.group(1)


def check_demo(result: Result, cwd: Path) -> None:
    jobs = readme_phrase(r"replays a bundled ([\d,]+)-job trace")
    rows = [line for line in result.stdout.splitlines() if line.startswith("│")]
    assert len(rows) == 6 and all(f" {jobs} " in row for row in rows), result.stdout  # "six policies"
    jcts = [float(row.split("│")[3].replace(",", "")) for row in rows]
    assert jcts == sorted(jcts)  # "ranked by average job completion time"


def check_simulate_philly(result: Result, cwd: Path) -> None:
    out = cwd / "out" / "sjf"
    assert sorted(p.name for p in out.iterdir()) == ["jobs.csv", "summary.json"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["jobs"] == 30_756 and summary["rejected"] == {}
    assert len((out / "jobs.csv").read_text().splitlines()) == 30_756 + 1  # one row per job


def check_simulate_sacct(result: Result, cwd: Path) -> None:
    summary = json.loads(result.stdout)
    assert summary["jobs"] == int(readme_phrase(r'prints `"jobs": (\d+)`'))
    assert summary["rejected"] == {} and set(summary["partitions"]) == {"batch", "high", "debug"}


def check_forecast(result: Result, cwd: Path) -> None:
    doc = json.loads(result.stdout.splitlines()[-1])
    assert doc["samples"] == int(readme_phrase(r'prints `"samples": (\d+)`'))
    assert len(doc["jobs"]) == 474 and [p["pending"] for p in doc["partitions"]] == [114, 360]


def check_whatif(result: Result, cwd: Path) -> None:
    doc = json.loads(result.stdout.splitlines()[-1])
    assert len(doc["candidates"]) == int(readme_phrase(r"here (\d+) candidates"))
    assert doc["changes"] == "add 103959:2x8" and doc["samples"] == 4 and doc["snapshot"]["pending"] == 474
    assert [c["rank"] for c in doc["candidates"]] == [1, 2, 3]


def check_compare(result: Result, cwd: Path) -> None:
    out = cwd / "out" / "cmp"
    for name in ("summary.json", "summary.csv", "jct_cdf.png", "queue_by_partition.png",
                 "utilization.png", "index.html", "sweep/plan.json"):  # fmt: skip
        assert (out / name).is_file(), name
    # Philly's VC table has no switches: no job spans two leaves, so no span plot ("otherwise one sentence").
    assert not (out / "span_hist.png").exists()
    assert "No job spans more than one leaf switch under any candidate" in (out / "index.html").read_text()
    summary = json.loads((out / "summary.json").read_text())
    # 4 policies x 2 placers x backfill on/off, less srtf with backfill: "skipped with a note"
    assert len(summary["candidates"]) == 14 and len(summary["skipped"]) == 2
    assert all(note.startswith("srtf/") for note in summary["skipped"])
    assert "note: srtf/consolidate+backfill: skipped" in result.stdout
    jcts = [c["avg_jct"] for c in summary["candidates"]]
    assert jcts == sorted(jcts)  # "ranked by average JCT"


def check_tune(result: Result, cwd: Path) -> None:
    for line in readme_output_after("prints the 8 trials ranked and then:"):
        assert line in result.stdout, (line, result.stdout)
    tune = json.loads((cwd / "out" / "tune" / "tune.json").read_text())
    assert tune["best"]["policy"] == readme_phrase(r"The winner is `([^`]+)`")
    assert len(tune["trials"]) == 8
    # README's next line applies the winner; offline, the emulator's apply (which wants a topology)
    policy = cwd / "out" / "tune" / "schedulingpolicy.yaml"
    two_leaf = ROOT / "manifests" / "samples" / "two-leaf.yaml"
    state = cwd / "state"
    done = CliRunner().invoke(cli, ["apply", "--state", str(state), "-f", str(two_leaf), "-f", str(policy)])
    assert done.exit_code == 0, done.output
    assert "schedulingpolicy.gputwin.io/tuned created" in done.stdout.splitlines()


def check_apply(result: Result, cwd: Path) -> None:
    for job in ("resnet50-4gpu", "llm-finetune", "bert-serving"):
        assert f"gpujob.gputwin.io/{job} created" in result.stdout.splitlines()
    assert "tracereplay.gputwin.io/demo-what-if created" in result.stdout.splitlines()


def check_run(result: Result, cwd: Path) -> None:
    assert result.stdout.strip().endswith(
        "GPUJobs 3 succeeded, 0 running, 0 queued, 0 pending, 0 rejected"
    ), result.stdout


def check_get_gpujobs(result: Result, cwd: Path) -> None:
    table = [line.split() for line in result.stdout.strip().splitlines()]
    assert table[0][:5] == ["NAME", "PHASE", "PARTITION", "GPUS", "NODES"]
    assert {row[0]: row[1] for row in table[1:]} == dict.fromkeys(
        ("bert-serving", "llm-finetune", "resnet50-4gpu"), "Succeeded"
    )


def check_get_yaml(result: Result, cwd: Path) -> None:
    listed = yaml.safe_load(result.stdout)
    kinds = {item["kind"] for item in listed["items"]}
    assert kinds == {"SwitchTopology", "GPUPartition", "SchedulingPolicy", "GPUJob", "TraceReplay"}
    assert all("status" in item for item in listed["items"] if item["kind"] == "GPUJob")


def check_events(result: Result, cwd: Path) -> None:
    # the serving sample's duration: it serves two hours, then ends (manifests/samples/gpujobs.yaml)
    assert re.search(r"gpujob/bert-serving +ended 7,200 s after submission", result.stdout), result.stdout


def check_delete(result: Result, cwd: Path) -> None:
    assert result.stdout.splitlines() == [
        f'gpujob.gputwin.io "{job}" deleted' for job in ("resnet50-4gpu", "llm-finetune", "bert-serving")
    ]


def check_kueue_export(result: Result, cwd: Path) -> None:
    kinds = [d["kind"] for d in yaml.safe_load_all((cwd / "kueue.yaml").read_text())]
    assert kinds.count("ClusterQueue") == 3 and kinds.count("LocalQueue") == 3, kinds


def check_render(result: Result, cwd: Path) -> None:
    names = ("topology.conf", "gputwin-partitions.conf", "gputwin-scheduling.conf", "job_submit.lua")
    for name in names:
        assert f"`{name}`" in README.read_text()  # the files README says render writes
        assert (cwd / "rendered" / name).stat().st_size > 0, name
    assert "PartitionName=train" in (cwd / "rendered" / "gputwin-partitions.conf").read_text()



def check_dry_run(result: Result, cwd: Path) -> None:
    assert "gpujob.gputwin.io/llm-finetune created (dry run)" in result.stdout.splitlines()
    assert not (cwd / ".gputwin").exists()  # a dry run stores nothing


def check_describe(result: Result, cwd: Path) -> None:
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["Name:", "llm-finetune"] and "Labels:       team=nlp" in lines
    assert any(line.startswith("Conditions:") for line in lines) and "Events:" in result.stdout


def check_selector(result: Result, cwd: Path) -> None:
    assert [row.split()[0] for row in result.stdout.strip().splitlines()[1:]] == ["llm-finetune"]


def check_wide(result: Result, cwd: Path) -> None:
    tables = result.stdout.strip().split("\n\n")
    assert tables[0].split()[:11] == ["NAME", "PHASE", "PARTITION", "GPUS", "NODES", "START-P50", "AGE", "USER",
                                      "SWITCHES", "PREEMPTIONS", "REASON"]  # fmt: skip
    assert "gpupartition.gputwin.io/train" in tables[1] and "TASK-TYPES" in tables[1]

def check_slurm_dry_run(result: Result, cwd: Path) -> None:
    assert readme_phrase(r"prints `(dry run: 0 file\(s\)\s+would change; nothing written)`").split() == \
        result.stdout.split()  # fmt: skip


def check_render_json(result: Result, cwd: Path) -> None:
    data = json.loads(result.stdout)
    assert set(data) == {"slurmVersion", "files", "derived"}
    assert {name: (cwd / "rendered" / name).read_text() for name in data["files"]} == data["files"]


Check = Callable[[Result, Path], None]
TRACE = "--trace ../shared/traces/philly_mix1/jobs.csv --cluster ../shared/traces/philly_mix1/cluster.csv"
RUN: dict[str, Check] = {
    "gputwin demo": check_demo,
    f"gputwin simulate {TRACE} --policy sjf --placement consolidate --out out/sjf": check_simulate_philly,
    "gputwin simulate --trace ../shared/traces/sacct_samples/sacct-P-22.05.txt "
    "--cluster manifests/samples/sacct-partitions.csv --json": check_simulate_sacct,
    f"gputwin compare {TRACE} --policies fifo,sjf,qssf,srtf --placements consolidate,topology-aware "
    "--backfill on,off --out out/cmp": check_compare,
    f"gputwin tune {TRACE} --objective avg_jct --budget 8 --seed 0 --holdout 0.3 --out out/tune": check_tune,
    "gputwin apply -f manifests/samples/": check_apply,
    "gputwin run": check_run,
    "gputwin forecast --snapshot tests/twin/data/philly-mix1-2vc.snapshot.json --samples 8 --horizon 12h --json":
        check_forecast,
    "gputwin whatif --snapshot tests/twin/data/philly-mix1-2vc.snapshot.json --policy sjf --policy qssf "
    "--add-nodes 103959:2x8 --samples 4 --horizon 1d --json": check_whatif,
    "gputwin get gpujobs": check_get_gpujobs,
    "gputwin get gputwin -o yaml": check_get_yaml,
    "gputwin events": check_events,
    "gputwin delete -f manifests/samples/gpujobs.yaml": check_delete,
    "gputwin slurm render --cluster manifests/samples/two-leaf.yaml --out rendered/": check_render,
    "gputwin apply --dry-run -f manifests/samples/": check_dry_run,
    "gputwin slurm apply --cluster manifests/samples/two-leaf.yaml --dry-run --conf-dir rendered/":
        check_slurm_dry_run,
    "gputwin slurm render --cluster manifests/samples/two-leaf.yaml -o json": check_render_json,
    "gputwin export kueue --cluster manifests/examples/shared-lab.yaml --out kueue.yaml": check_kueue_export,
    "gputwin describe gpujob llm-finetune": check_describe,
    "gputwin get gpujobs -l team=nlp": check_selector,
    "gputwin get gpujobs,gpupartitions -o wide": check_wide,
}
# The Philly compare (14 candidates) and the 8-trial tune run whole, as README shows them: slow.
SLOW = {key for key in RUN if key.startswith(("gputwin compare", "gputwin tune"))}

KUBE = ("kubectl against a live Kubernetes cluster (tests/operator/test_operator_e2e.py applies the CRDs, "
        "samples and install manifests to a real API server under CI)")
NOT_RUN: dict[str, str] = {
    "gputwin forecast --slurm --save now.json": "needs a reachable slurmctld (tests/slurm/test_slurm_snapshot.py "
        "reads the snapshot on the SLURM test cluster)",
    "cat manifests/samples/gpujobs.yaml '|' gputwin apply -f -": (
        "a shell pipe; tests/cli/test_cli_emulator.py runs `apply -f -` on standard input"),
    "python3 -m venv .venv": "creates the venv this suite already runs in",
    ". .venv/bin/activate": "activates the venv this suite already runs in",
    "pip install -e '.[test]' --config-settings editable_mode=strict":
        "the install this suite runs from (tests/test_packaging.py checks the packaging)",
    "python -m pytest": "the suite itself",
    "kubectl apply -f out/tune/schedulingpolicy.yaml":
        KUBE + "; the tune check applies the file with gputwin apply",
    "kubectl apply -k crds/": KUBE,
    "gputwin operator --all-namespaces": "runs the operator against the kubeconfig's cluster until stopped "
        "(tests/operator/test_operator_e2e.py runs it on a real API server under CI)",
    "kubectl apply -k manifests/operator/": KUBE,
    "kubectl apply -f manifests/samples/": KUBE,
    "kubectl get gputwin": KUBE,
    "bash scripts/kind/up.sh": "needs Docker and kind (tests/k8s/test_k8s_kind_assets.py runs "
        "up.sh --no-build with stub kind and docker against a real API server)",
    "kubectl get gpujobs -w": KUBE + ", watching until stopped",
    "bash scripts/kind/down.sh": "needs Docker and kind",
    "gputwin slurm history --start 2026-11-01 --end now --out history.csv":
        "needs sacct and a live slurmdbd (tests/slurm/test_slurm_history.py runs slurm history on the "
        "SLURM test cluster)",
    "gputwin whatif --kube --namespace team-a --policy sjf --drain kf-0 --out whatif-report":
        "forks a live Kubernetes cluster (tests/operator/test_operator_whatif.py runs whatif --kube --drain "
        "on the real API server with the operator running; tests/cli/test_cli_whatif_out.py the --out folder)",
    "gputwin slurm apply --cluster manifests/samples/two-leaf.yaml --dry-run":
        "checks against the live cluster's slurmctld (tests/slurm/test_slurm_apply.py runs this command on "
        "the SLURM test cluster; the --conf-dir dry run after it runs here, offline)",
}  # fmt: skip


def resolve(token: str) -> str:
    """A repository path in a README command, made absolute (the command runs elsewhere)."""
    if token.startswith("../shared/"):
        return str(SHARED / token.removeprefix("../shared/"))
    if token.startswith(REPO_PREFIXES):
        return str(ROOT / token)
    return token


def run_block(block: Block, cwd: Path) -> None:
    for command in block.commands:
        if command.text in NOT_RUN:
            continue
        check = RUN[command.text]
        assert command.argv[0] == "gputwin", command
        argv = [resolve(token) for token in command.argv[1:]]
        missing = [a for a in argv if a.startswith(str(SHARED)) and not Path(a).exists()]
        if missing:
            pytest.skip(f"README.md:{command.line}: needs ../shared/traces/ ({missing[0]} is missing)")
        result = CliRunner().invoke(cli, argv)
        assert result.exit_code == 0, (command.text, result.output, result.exception)
        check(result, cwd)


def block_params() -> list[object]:
    params = []
    for block in BLOCKS:
        if all(c.text in NOT_RUN for c in block.commands):
            continue  # reported one by one by test_readme_command_not_run_here
        slow = any(c.text in SLOW for c in block.commands)
        name = re.sub(r"[^a-z0-9]+", "-", block.section.lower()).strip("-")[:40]
        marks = [pytest.mark.slow] if slow else []
        params.append(pytest.param(block, id=f"L{block.line}-{name}", marks=marks))
    return params


@pytest.mark.parametrize("block", block_params())
def test_readme_block_runs_and_prints_what_readme_says(
    block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # out/…, rendered/ and the emulator's default ./.gputwin land here
    monkeypatch.delenv("GPUTWIN_STATE", raising=False)
    monkeypatch.delenv("SLURM_CONF", raising=False)
    run_block(block, tmp_path)


def test_every_readme_command_is_run_or_listed() -> None:
    """A command README gains (or changes) must be added to RUN or NOT_RUN; stale entries go."""
    in_readme = {c.text: c.line for block in BLOCKS for c in block.commands}
    unknown = {text: f"README.md:{line}" for text, line in in_readme.items() if text not in RUN | NOT_RUN}
    assert not unknown, f"README commands neither run nor listed as not run: {unknown}"
    stale = (set(RUN) | set(NOT_RUN)) - set(in_readme)
    assert not stale, f"entries for commands README no longer has: {stale}"
    assert not set(RUN) & set(NOT_RUN)


@pytest.mark.parametrize(
    "command",
    [c for block in BLOCKS for c in block.commands if c.text in NOT_RUN],
    ids=lambda c: f"L{c.line}",
)
def test_readme_command_not_run_here(command: Command) -> None:
    pytest.skip(f"README.md:{command.line}: `{command.text}`: {NOT_RUN[command.text]}")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(["a \\", "  b # c"], ["a b"], id="continuation-and-comment"),
        pytest.param(["x; y && z"], ["x", "y", "z"], id="separators"),
        pytest.param(["p 'q r' \"#s\""], ["p 'q r' '#s'"], id="quotes-keep-hash"),
        pytest.param(["# only a comment", ""], [], id="comment-line"),
    ],
)
def test_command_extraction(body: list[str], expected: list[str]) -> None:
    assert [c.text for c in commands(list(enumerate(body, 1)))] == expected
