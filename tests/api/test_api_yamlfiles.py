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
