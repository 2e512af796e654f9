"""numalab: how the Linux kernel places work on NUMA machines, as a computational book."""

__version__ = "0.1.0"
