"""Terminal tables: piped (not a terminal), a table is as wide as it needs, so no name is cut."""

from __future__ import annotations

import pytest

from gputwin.cli.output import ranked_table

ROW = {"jobs": 3375, "avg_jct": 422.046, "p99_jct": 4969.5, "avg_queue": 175.7, "p99_queue": 2715.8,
       "gpu_utilization": 0.4243, "avg_overhead": 0.0062, "preemptions": 0}  # fmt: skip


@pytest.mark.parametrize("length", [20, 60, 200], ids=["short", "longer-than-140-columns-allow", "very-long"])
def test_piped_ranked_tables_keep_whole_names_on_one_line(capsys: pytest.CaptureFixture[str], length: int) -> None:
    name = ("srtf/random/history+backfill/" * 10)[:length]
    ranked_table([{"rank": 1, "candidate": name, **ROW}], (), "gputwin tune")
    out = capsys.readouterr().out
    assert any(name in line for line in out.splitlines()), out
    assert "…" not in out
    assert "422.0" in out and "42.4" in out and "0.62" in out and "GPU util (%)" in out
