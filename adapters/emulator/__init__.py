"""The embedded emulator's side of the outside world: a file-backed object store with a virtual clock.

`gputwin apply / get / delete / run / events` (`gputwin.cli.emulator`) run the operator's
reconcilers against a `FileStore` and the simulated backend, with no cluster at all.
"""

from .filestore import EPOCH, FileStore, ObjectNotFound

__all__ = ["EPOCH", "FileStore", "ObjectNotFound"]
