"""The bounded manifest reader: caps, both parsers' depth limits, and what each refusal says."""

from __future__ import annotations

from pathlib import Path

import pytest
from gputwin.api import yamlfiles
from gputwin.api.yamlfiles import Budget, PureStrictLoader, YamlFileError, documents, read_text


@pytest.mark.parametrize(
    ("text", "field", "reason"),
    [
        pytest.param(
            "a: " + "[" * 150 + "]" * 150, "line 1, column", "nested deeper than 100 levels", id="deep"
        ),
        pytest.param("a: 1\na: 2\n", "line 2, column 1", "found duplicate key 'a'", id="duplicate-key"),
        pytest.param("a: b\x00", "line 1, column 5", "character #x0000 is not allowed", id="nul"),
        pytest.param("a: 1\n---\nb: [\n", "line 4, column 1", "", id="second-document"),
        pytest.param("a: !!binary aGk=", "line 1, column 4", "tag !!binary is not accepted", id="binary"),
        pytest.param("a: !!set {b}", "line 1, column 4", "tag !!set is not accepted", id="set"),
        pytest.param(
            "a: !!timestamp 2024-05-01", "line 1, column 4", "tag !!timestamp is not", id="timestamp"
        ),
    ],
)
def test_refusals_are_located(text: str, field: str, reason: str) -> None:
    with pytest.raises(YamlFileError) as caught:
        list(documents(text))
    assert caught.value.field.startswith(field) and reason in caught.value.reason
    assert "\n" not in str(caught.value)


LOADERS = pytest.mark.parametrize(
    "loader", [yamlfiles.StrictLoader, PureStrictLoader], ids=["default", "pure-python"]
)


@LOADERS
@pytest.mark.parametrize(
    "text", ["[" * 5000, "a:\n" + "".join(" " * i + "a:\n" for i in range(1, 3000))], ids=["flow", "block"]
)
def test_both_parsers_cap_depth(loader: type, text: str) -> None:
    """Where libyaml is missing PyYAML's composer recurses: the cap stops it before Python's limit."""
    with pytest.raises(YamlFileError, match="nested deeper than|maximum nesting depth") as caught:
        list(documents(text, loader))
    assert caught.value.field.startswith("line ")


@LOADERS
def test_both_parsers_read_the_same(loader: type) -> None:
    text = "a: [1, {b: 2024-05-01}]\n---\n---\nc: " + "9" * 50 + "\n"
    assert list(documents(text, loader)) == [
        (1, {"a": [1, {"b": "2024-05-01"}]}),
        (2, None),
        (3, {"c": 1e50}),
    ]


def test_long_integers_are_read_as_floats() -> None:
    assert list(documents("a: " + "9" * 5000 + "\nb: 0x" + "f" * 100 + "\nc: 12\n")) == [
        (1, {"a": float("inf"), "b": float("inf"), "c": 12})
    ]


def test_dates_stay_strings() -> None:
    assert list(documents("start: 2024-05-01\n")) == [(1, {"start": "2024-05-01"})]


def test_the_budget_is_shared_by_every_file(tmp_path: Path) -> None:
    one = tmp_path / "a.yaml"
    one.write_text("a: " + "x" * 1000 + "\n")
    budget = Budget(left=1500)
    assert read_text(one, budget).startswith("a: x") and budget.left == 1500 - 1004
    with pytest.raises(
        YamlFileError, match="^path: the manifest files given hold more than .* bytes together"
    ):
        read_text(one, budget)


@pytest.mark.parametrize(
    ("version", "caps"),
    [((0, 2, 5), False), ((0, 2, 6), True), ((0, 3, 0), True), ((0, 1, 7), False), ((1, 0, 0), True)],
)
def test_libyaml_is_trusted_with_depth_only_from_0_2_6(version: tuple[int, int, int], caps: bool) -> None:
    assert yamlfiles.libyaml_caps_nesting(version) is caps


def test_the_default_loader_survives_100k_levels_in_a_child_process() -> None:
    """Over libyaml 0.2.5 PyYAML's C composer overflowed the C stack on this input (a segfault
    killed CI's whole test run); a child process turns a crash into a failure, not a dead session."""
    import subprocess
    import sys

    script = (
        "from gputwin.api.yamlfiles import documents, YamlFileError\n"
        "try:\n    list(documents('[' * 100_000))\nexcept YamlFileError as exc:\n    print(exc.field)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout.startswith("line 1, column")) == (0, True), done.stderr[-2000:]


@pytest.mark.skipif(not yamlfiles.yaml.__with_libyaml__, reason="libyaml is not installed")
@pytest.mark.parametrize("text", ["a: 1\n---\n" + "[\n" * 100_000, "- " * 50_000 + "1\n"], ids=["flow", "block"])
def test_the_event_depth_check_stops_at_the_first_level_too_deep(text: str) -> None:
    """What guards PyYAML's C composer over libyaml < 0.2.6 (run here whatever libyaml is installed)."""
    with pytest.raises(YamlFileError, match="nested deeper than 100 levels") as caught:
        yamlfiles._check_depth_by_events(text)
    assert caught.value.field.startswith("line ")
