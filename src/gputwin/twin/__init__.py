"""The live twin: a snapshot of a running cluster, and forecasts replayed from it.

`snapshot` holds the values (what runs where since when, what waits in which order, which nodes
take no new work), `snapfile` saves and loads them as versioned JSON, `seed` starts the one
runtime from a snapshot instead of from empty, `sampling` draws the run times nobody knows yet,
and `forecast` replays N seeded draws (in parallel) into per-job start quantiles and per-partition
drain times. Readers of live clusters (`gputwin.adapters.slurm.snapshot`) produce a `Snapshot`;
nothing here reads a cluster, a clock or the network.
"""
