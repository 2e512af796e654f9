"""Faithful ports of kernel code, laid out like the kernel tree.

The package path mirrors the source path, so a reviewer finds the port of a
file where the file is: ``lib/group_cpus.c`` -> ``numalab/kernel/lib/group_cpus.py``,
``kernel/sched/ext/idle.c`` (Linux 7.2; ``ext_idle.c`` in earlier releases)
-> ``numalab/kernel/sched/ext_idle.py``,
``kernel/workqueue.c`` -> ``numalab/kernel/workqueue.py`` (the kernel's own
``kernel/`` folder is this package's top level), ``drivers/pci/pci-driver.c``
-> ``numalab/kernel/drivers/pci/pci_driver.py``.
"""
