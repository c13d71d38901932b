"""gputwin: a digital twin for GPU-cluster scheduling.

One scheduling core (`gputwin.core`) runs in two environments: the discrete-event simulator
(`gputwin.sim`) and the live backends (`gputwin.adapters`, driven by `gputwin.operator`).
"""

__version__ = "0.1.0"
