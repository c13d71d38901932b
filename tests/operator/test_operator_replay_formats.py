"""A TraceReplay reads every format `gputwin simulate --format` reads: the resource's enum, the
operator's mapping and the readers' list agree (a reader added without the other two fails here)."""

from __future__ import annotations

from typing import get_args

from gputwin.adapters.traces.sniff import FORMATS as READERS
from gputwin.api.workloads import TraceSource
from gputwin.operator.replay import FORMATS


def test_every_reader_is_replayable_and_every_replay_format_has_a_reader() -> None:
    declared = set(get_args(TraceSource.model_fields["format"].annotation))
    assert declared == set(FORMATS)
    assert set(FORMATS.values()) == {"auto", *READERS}
