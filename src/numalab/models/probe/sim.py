"""Where and when the kernel runs driver probes: a discrete-event model.

The question of the probing chapter: on a NUMA machine, which thread and
which CPU run each driver's ``probe()``, and how long does boot-time probing
take under four policies?

=================  ==========================================================
policy             what changes
=================  ==========================================================
``mainline``  (a)  the kernel the PCI patch was written against (Linux 6.12's
                   ``pci_call_probe()``). An asynchronous probe runs
                   in an unbound ``async_wq`` worker on the device's node;
                   for PCI, ``pci_call_probe()`` then hands it to
                   ``work_on_cpu()`` on the node's *first* housekeeping CPU,
                   so all PCI probes of a node share that CPU. Synchronous PCI
                   probes take the same ``work_on_cpu()`` detour; other
                   synchronous probes run in the caller (a udev worker).
``mainline-7.2``   the "before" of the driver-core series: Linux 7.2's
              (a7) ``pci_call_probe()`` (Frederic Weisbecker's housekeeping
                   series) queues the probe with ``queue_work_on(cpu,
                   pci_probe_wq)`` on the node's first ``HK_TYPE_DOMAIN`` CPU
                   (the same bound pool), and ``housekeeping_update()``
                   flushes that workqueue when a cpuset partition changes.
``pf-wq-worker``   "PCI: Avoid work_on_cpu() in async probe workers"
              (b)  (PF_WQ_WORKER test): ``pci_call_probe()`` probes in place
                   when already in a workqueue worker, so asynchronous PCI
                   probes stay in their unbound workers (in their pod).
``driver-core``    "[PATCH v2 0/3] Add NUMA-node-aware synchronous probing to
              (c)  driver core": a synchronous probe of a device with a node is
                   queued with ``queue_work_node(node, system_dfl_wq)`` and the
                   caller waits; the PCI-specific code and its flush hook
                   in ``housekeeping_update()`` are removed.
``bus-opt-in`` (d) the variant asked for in review: (c) only for buses that
                   opt in (PCI); other buses keep the mainline path.
=================  ==========================================================

How a probe is modelled
-----------------------
A device's probe is ``rounds`` repetitions of (``cpu_ms / rounds`` of CPU
work, then ``wait_ms / rounds`` of waiting for hardware, during which the
CPU is free). A probe of a PF may end by probing its VFs synchronously
(SR-IOV enable), from inside the PF's probe.

CPU work on a node other than the device's costs more (its memory, MMIO and
allocations are remote): a CPU segment of ``x`` ms takes
``x * (1 + alpha * (d / 10 - 1))`` ms of CPU, where ``d`` is the SLIT
distance between the CPU's node and the device's node (10 = local) and
``alpha`` (default 0.5, an assumption: the patches publish no remote
measurement) is the share of the work that pays the full distance ratio.
Devices without a node (-1) never pay it.

Kernel rules the model follows
------------------------------
* CPUs are *time-sliced*: the runnable threads of a CPU take turns, each
  running up to ``timeslice_ms`` (3 ms: EEVDF's ``sysctl_sched_base_slice``,
  0.75 ms, times ``1 + ilog2(min(ncpus, 8))``) before the next one in FIFO
  order; no wake-up preemption (an approximation of EEVDF's eligibility
  rule). An optional background load (runnable tasks per CPU) takes a fluid
  share: the running thread progresses at ``1 / (1 + background)``. When a
  CPU's SMT sibling is also running a thread, each progresses at
  ``smt_factor`` of full speed (1 = no SMT penalty; two busy siblings give
  ``2 * smt_factor`` of one core's throughput).
* A probe's CPU work may include a *serial* share (``Device.serial``) done
  under one machine-wide sleeping lock, standing for the global locks a probe
  takes (IRQ vector allocation under ``sparse_irq_lock``, kernfs/sysfs
  creation, zone locks); waiters sleep in FIFO order.
* Bound workqueue pools (``work_on_cpu()``: ``kworker/CPU:ID``) are
  concurrency-managed: a queued item starts only when no worker of the pool
  is running; a worker that sleeps (hardware wait) lets the next item start;
  one that has run more than ``cpu_intensive_thresh_ms`` (10 ms,
  ``workqueue.cpu_intensive_thresh_us``) of CPU since it woke is marked
  CPU-intensive and stops counting. The kernel checks this only at a
  scheduler tick (``wq_worker_tick()``, workqueue.c 6.12:1488, 7.2:1499):
  ``Params.hz`` (default 250: ``kernel/Kconfig.hz``'s default and Debian's
  amd64 setting, ``CONFIG_HZ=250`` in linux-base-7.2.13+deb14-amd64's config;
  assumed for the postings' kernels, whose config is not published) puts
  ticks every ``1000 / hz`` ms from time 0; ``hz=0`` is the model's
  continuous check. Items then share the CPU.
* Unbound workqueues (``async_wq``, ``system_dfl_wq``: ``kworker/uPOOL:ID``)
  start every item at once, up to the node's share of ``max_active``
  (:func:`~numalab.kernel.workqueue.wq_node_max_active`, Linux 6.9+; the
  kernel version of the policy sets ``max_active``:
  :func:`~numalab.kernel.workqueue.workqueue_max_active`). ``queue_work_node()``
  targets the caller's CPU if it is on the node, else the node's first online
  CPU (:func:`~numalab.kernel.workqueue.select_numa_node_cpu`); the
  item goes to the pool of that CPU's pod (affinity scope ``cache``: the
  CPUs sharing its last-level cache).
* Where a thread runs when it starts or wakes is the *scheduler's* choice.
  ``Params.wakeup="llc"`` (the default; the chapter's *pod rule*) is a model
  rule built on the wake-up path of Linux 6.12 and 7.2, plus two assumptions
  of its own: a *new* worker starts in its pod, and no load balancing (see
  "Simplified" below). Its ported part: an unbound kworker woken for new work is first sent back into its
  pod by ``kick_pool()`` (workqueue.c 6.12:1290-1297, 7.2:1301-1308: when
  its wake CPU is outside the pod, ``cpumask_any_and_distribute()`` picks the
  next pod CPU after a per-waker cursor); then ``select_idle_sibling()``
  (fair.c 6.12:7937, 7.2:9027) keeps the target (the previous CPU) if idle,
  else the task's recently used CPU if idle and in the target's LLC, else
  scans ``sd_llc`` of the target (6.12:8032, 7.2:9122) from ``target + 1``
  with wrap: with SMT, the first fully idle core (``select_idle_core()``),
  else an idle SMT sibling of the previous CPU, else the first idle CPU;
  when nothing in the LLC is idle, the target itself, busy. A waking thread
  never leaves the LLC of its previous CPU. Simplified: ``wake_affine()``
  always keeps ``prev_cpu`` (it may pick the waker's CPU when prev is busy),
  ``SIS_UTIL``'s scan limit and the periodic and idle load balancers are
  left out, and a *new* worker is placed as ``kick_pool()`` would place it
  (in the kernel ``create_worker()`` wakes it where kthreadd's fork put it,
  workqueue.c 7.2:2861-2893: the idlest CPU near kthreadd, possibly on
  another node, where its wake-ups then stay; neither rule covers that). ``wakeup="node"`` is the model's own rule, not the kernel's:
  when the pod and LLC are busy, any idle CPU of the node, else the node's
  least loaded CPU; it stands for what load balancing across the node could
  do at best. Ties in ``"node"`` are broken by the seeded generator. Bound
  kworkers never move; a running thread keeps its CPU.
* Isolated CPUs (``isolcpus=domain``; ``nohz_full``) are honoured through the
  housekeeping masks of the policy's kernel: unbound workers use
  ``wq_unbound_cpumask`` (6.12: ``HK_TYPE_WQ`` and ``HK_TYPE_DOMAIN``; 7.2:
  ``HK_TYPE_DOMAIN`` only), udev workers the ``HK_TYPE_DOMAIN`` CPUs,
  ``pci_call_probe()`` its own rule (the same split).
  ``Params.partition_cpus`` isolates more CPUs at ``partition_at_ms`` through
  a cpuset partition (7.2-based policies): the writer runs
  :data:`~numalab.kernel.sched.isolation.HOUSEKEEPING_UPDATE_STEPS` (with the
  PCI flush under ``mainline-7.2``, without it under the series), and the
  run records when the write returned and how much probe CPU time ran on the
  newly isolated CPUs afterwards. Unbound workers keep the CPU mask of their
  pool; new work goes to pools of the new mask.
* Each driver's devices are attached by one udev worker (module load:
  ``driver_register()`` -> ``__driver_attach()`` for each device, in order),
  all drivers starting at time 0, each worker on a CPU drawn from the seeded
  generator among the housekeeping CPUs. Asynchronous probes are queued
  without waiting; synchronous ones are probed one after another.
* ``device_lock`` is taken by the thread that enters the driver core for
  the device (the udev worker, the async worker, or the PF's probing thread
  for a VF). When another thread runs ``probe()`` (``work_on_cpu()``, or the
  v2 series' ``queue_work_node()`` hop), ``lockdep_assert_held()`` fails in
  the probe: the record's ``holds_device_lock`` is False.

Times are in milliseconds from the moment the udev workers start. Same
inputs and seed, same numbers.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...cpumask import cpus as _cpus
from ...errors import ParameterError
from ...kernel.drivers.base.dd import (NEED_PARENT_LOCK_BUSES, PROBE_DEFAULT_STRATEGY, PROBE_PREFER_ASYNCHRONOUS,
                                      driver_allows_async_probing, probe_redirected_to_node)
from ...kernel.drivers.pci.pci_driver import PCI_PROBE_WQ, pci_call_probe_cpu
from ...kernel.sched.isolation import (HK_TYPE_DOMAIN, Housekeeping, housekeeping_cpumask,
                                      housekeeping_update, housekeeping_update_steps)
from ...kernel.workqueue import (AFFINITY_SCOPES, WORK_CPU_UNBOUND, WQ_LIMITS, node_online,
                                select_numa_node_cpu, unbound_pod_cpus, workqueue_max_active,
                                wq_node_max_active, wq_unbound_cpumask)
from ...topology.model import CPU, Node, Topology
from ...validate import integer, number, one_of
from ...validate import seed as _seed

__all__ = ["POLICIES", "POLICY_ALIASES", "POLICY_KERNEL", "OPT_IN_BUSES", "Device", "Params", "ProbeRecord",
           "ProbeRun", "ProbeModelError", "policy_name", "remote_factor", "simulate",
           "machine", "thread_table"]

POLICIES = ("mainline", "mainline-7.2", "pf-wq-worker", "driver-core", "bus-opt-in")
POLICY_ALIASES = {"a": "mainline", "a7": "mainline-7.2", "b": "pf-wq-worker",
                  "c": "driver-core", "d": "bus-opt-in", "before": "mainline",
                  "7.2": "mainline-7.2", "fix": "pf-wq-worker", "v2": "driver-core",
                  "opt-in": "bus-opt-in"}
# The kernel each policy's code comes from: the PCI patch was posted against the
# work_on_cpu() code (6.12 has it); the series against 7.2's housekeeping code.
POLICY_KERNEL = {"mainline": "6.12", "pf-wq-worker": "6.12", "mainline-7.2": "7.2",
                 "driver-core": "7.2", "bus-opt-in": "7.2"}
OPT_IN_BUSES = frozenset({"pci"})   # buses that set the opt-in flag in variant (d)

_EPS = 1e-9

# Ranges of the inputs (checked where they enter: Device, Params, simulate):
ALPHA_RANGE = (0.0, 1.0)          # a share of the work (module docstring)
MAX_BACKGROUND = 10_000.0         # runnable background tasks per CPU
MAX_PROBE_MS = 1e9                # one probe's CPU or wait time (about 11 days)
MAX_ROUNDS = 10_000               # (CPU, wait) alternations of one probe
WQ_MAX_ACTIVE = max(mx for mx, _ in WQ_LIMITS.values())   # the largest kernel cap
TIMESLICE_MS = 3.0                # EEVDF base slice 0.75 ms x (1 + ilog2(8))
MAX_TIMESLICE_MS = 1000.0
WAKEUP_RULES = ("llc", "node")    # both model rules: "llc" = pod rule (kernel wake-up path,
                                  # new workers in their pod, no load balancing); "node" = node-wide
HZ_DEFAULT = 250                  # CONFIG_HZ: Kconfig's default and Debian's (assumed for the postings)


class ProbeModelError(ParameterError):
    """A device list or parameter the probe model cannot use."""


def policy_name(policy: str) -> str:
    """The canonical policy name for a name or alias (``"a"`` -> ``"mainline"``).

    >>> policy_name("b"), policy_name("driver-core")
    ('pf-wq-worker', 'driver-core')
    """
    p = POLICY_ALIASES.get(policy, policy)
    if p not in POLICIES:
        raise ProbeModelError(f"unknown policy {policy!r} (one of {', '.join(POLICIES)}, "
                              f"or a/a7/b/c/d)")
    return p


@dataclass(frozen=True)
class Device:
    """One device to probe.

    name:       printed name (``"nvme0"``, ``"0000:01:00.0"``)
    bus:        ``"pci"``, ``"usb"``, ``"platform"``, ...
    node:       ``dev_to_node()``; -1 when the firmware gives none
    probe_type: ``"async"`` (``PROBE_PREFER_ASYNCHRONOUS``) or ``"sync"``
                (the default strategy; ``Params.driver_async_probe`` may
                still make it asynchronous)
    cpu_ms:     CPU time of the probe run alone on a local CPU
    wait_ms:    time spent waiting for the hardware (CPU free meanwhile)
    rounds:     how many (CPU, wait) alternations the probe is cut into
    driver:     the driver's name; devices of one driver are attached by the
                same caller, in order (default: the name without its last
                digit run and one separator before it: ``"nvme"`` for
                ``"nvme2"``, ``"mlx5"`` for ``"mlx5_0"``)
    vfs:        VFs whose probes the PF's probe makes (SR-IOV), in order
    serial:     share of the CPU work done under one machine-wide lock (0..1)

    >>> Device("mlx5_0").driver, Device("nvme12").driver, Device("usb").driver
    ('mlx5', 'nvme', 'usb')
    """

    name: str
    bus: str = "pci"
    node: int = -1
    probe_type: str = "sync"
    cpu_ms: float = 1.0
    wait_ms: float = 0.0
    rounds: int = 4
    driver: str = ""
    vfs: tuple["Device", ...] = ()
    is_vf: bool = False
    serial: float = 0.0

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ProbeModelError(f"a device name must be a non-empty string, not {self.name!r}")
        if self.probe_type not in ("async", "sync"):
            raise ProbeModelError(f"{self.name}: probe type must be async or sync, "
                                  f"not {self.probe_type!r}")
        err = ProbeModelError
        integer(f"{self.name}: node", self.node, -1, error=err)
        number(f"{self.name}: cpu_ms", self.cpu_ms, 0, MAX_PROBE_MS, error=err)
        number(f"{self.name}: wait_ms", self.wait_ms, 0, MAX_PROBE_MS, error=err)
        integer(f"{self.name}: rounds", self.rounds, 1, MAX_ROUNDS, error=err)
        number(f"{self.name}: serial", self.serial, 0, 1, error=err)
        if not isinstance(self.bus, str) or not isinstance(self.driver, str):
            raise ProbeModelError(f"{self.name}: bus and driver must be strings")
        if not all(isinstance(v, Device) for v in self.vfs):
            raise ProbeModelError(f"{self.name}: vfs must be Devices")
        if not self.driver:
            import re
            object.__setattr__(self, "driver",
                               re.sub(r"[_.:-]?\d+$", "", self.name) or self.name)

    @property
    def total_ms(self) -> float:
        return self.cpu_ms + self.wait_ms


@dataclass(frozen=True)
class Params:
    """Knobs of the model (defaults: the kernel's defaults, no isolation).

    alpha:               remote-memory sensitivity (see the module docstring)
    isolcpus:            mask given to ``isolcpus=domain``
    nohz_full:           mask given to ``nohz_full=``
    background:          runnable background tasks per CPU (a float applies to
                         every CPU; a mapping gives it per CPU)
    cpu_intensive_thresh_ms: the bound pools' CPU-intensive threshold
    affinity_scope:      unbound workqueues' default affinity scope
    driver_async_probe:  the ``driver_async_probe=`` command-line list
    max_active:          unbound workqueues' ``max_active`` (None: each
                         workqueue's value in the policy's kernel)
    caller_cpu:          driver name -> CPU of the udev worker attaching its
                         devices (default: drawn from the seeded generator)
    timeslice_ms:        the scheduler's time slice
    smt_factor:          speed of a thread whose SMT sibling is busy (0..1]
    wakeup:              ``"llc"`` (the pod rule: the kernel's wake-up path, new
                         workers in their pod, no load balancing) or ``"node"``
                         (the model's rule: any idle CPU of the node)
    hz:                  scheduler ticks per second for the CPU-intensive
                         check (0: checked continuously, the model's idealisation)
    partition_cpus:      CPUs a cpuset isolated partition takes at runtime (0: none)
    partition_at_ms:     when that partition is written
    """

    alpha: float = 0.5
    isolcpus: int = 0
    nohz_full: int = 0
    background: float | Mapping[int, float] = 0.0
    cpu_intensive_thresh_ms: float = 10.0
    affinity_scope: str = "cache"
    driver_async_probe: str = ""
    max_active: int | None = None
    caller_cpu: Mapping[str, int] = field(default_factory=dict)
    timeslice_ms: float = TIMESLICE_MS
    smt_factor: float = 1.0
    wakeup: str = "llc"
    hz: int = 250
    partition_cpus: int = 0
    partition_at_ms: float = 0.0

    def __post_init__(self):
        err = ProbeModelError
        number("alpha", self.alpha, *ALPHA_RANGE, error=err)
        from ...cpumask import MAX_CPUS
        for what in ("isolcpus", "nohz_full"):
            if integer(what, getattr(self, what), 0, error=err).bit_length() > MAX_CPUS:
                raise ProbeModelError(f"{what} names CPUs beyond the {MAX_CPUS} numalab handles")
        if isinstance(self.background, Mapping):
            for cpu, bg in self.background.items():
                integer("background: CPU", cpu, 0, error=err)
                number(f"background[{cpu}]", bg, 0, MAX_BACKGROUND, error=err)
        else:
            number("background", self.background, 0, MAX_BACKGROUND, error=err)
        number("cpu_intensive_thresh_ms", self.cpu_intensive_thresh_ms, 0, lo_open=True,
               error=err)
        one_of("affinity_scope", self.affinity_scope, AFFINITY_SCOPES, error=err)
        if not isinstance(self.driver_async_probe, str):
            raise ProbeModelError(f"driver_async_probe must be a string, "
                                  f"not {self.driver_async_probe!r}")
        if self.max_active is not None:
            integer("max_active", self.max_active, 1, WQ_MAX_ACTIVE, error=err)
        number("timeslice_ms", self.timeslice_ms, 0, MAX_TIMESLICE_MS, lo_open=True, error=err)
        number("smt_factor", self.smt_factor, 0, 1, lo_open=True, error=err)
        one_of("wakeup", self.wakeup, WAKEUP_RULES, error=err)
        integer("hz", self.hz, 0, 10_000, error=err)
        if integer("partition_cpus", self.partition_cpus, 0, error=err).bit_length() > MAX_CPUS:
            raise ProbeModelError(f"partition_cpus names CPUs beyond the {MAX_CPUS} numalab "
                                  "handles")
        number("partition_at_ms", self.partition_at_ms, 0, MAX_PROBE_MS, error=err)
        if not isinstance(self.caller_cpu, Mapping):
            raise ProbeModelError(f"caller_cpu must map driver names to CPUs, "
                                  f"not {self.caller_cpu!r}")
        for drv, cpu in self.caller_cpu.items():
            integer(f"caller_cpu[{drv!r}]", cpu, 0, error=err)


@dataclass
class ProbeRecord:
    """What happened to one probe (times in ms)."""

    device: str
    bus: str
    dev_node: int
    policy: str
    mode: str                 # "async" | "sync"
    parent: str = ""          # the PF, for a VF probed from its PF's probe
    queued: float = 0.0       # when the driver core decided to probe it
    start: float = math.nan   # when probe() began executing
    end: float = math.nan
    cpu: int = -1             # CPU at start
    cpu_node: int = -1
    thread: str = ""          # comm of the thread running probe()
    thread_kind: str = ""     # "bound kworker" | "unbound kworker" | "udev worker"
    lock_holder: str = ""     # comm of the thread holding device_lock
    holds_device_lock: bool = True
    # need_parent_lock buses (USB): does the probing thread hold the parent's
    # device_lock too (None: the bus does not take it)
    holds_parent_lock: bool | None = None
    remote: bool = False      # some CPU work ran off the device's node
    migrations: int = 0

    @property
    def cost(self) -> float:
        return self.end - self.start


@dataclass
class ProbeRun:
    """The outcome of :func:`simulate`."""

    policy: str
    seed: int
    probes: list[ProbeRecord]
    # with Params.partition_cpus: at_ms, returned_ms (when the partition write
    # returned), isolated_cpu_ms_after (probe CPU time run on the newly isolated
    # CPUs after that), probes_on_isolated_after (how many probes it was)
    partition: dict[str, float] = field(default_factory=dict)

    @property
    def makespan(self) -> float:
        """Time at which the last probe ended (ms)."""
        return max((p.end for p in self.probes), default=0.0)

    def by_device(self) -> dict[str, ProbeRecord]:
        return {p.device: p for p in self.probes}

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for p in self.probes:
            d = dataclasses.asdict(p)
            d["cost"] = p.cost
            out.append(d)
        return out

    def to_frame(self):
        import pandas as pd
        return pd.DataFrame(self.rows())

    def to_dict(self) -> dict[str, Any]:
        out = {"policy": self.policy, "seed": self.seed, "makespan_ms": self.makespan,
               "probes": self.rows()}
        if self.partition:
            out["partition"] = dict(self.partition)
        return out


def remote_factor(topo: Topology, cpu_node: int, dev_node: int, alpha: float) -> float:
    """CPU-time multiplier for probe work on ``cpu_node`` for a device of ``dev_node``.

    ``1 + alpha * (d / 10 - 1)`` with ``d`` the SLIT distance; 1 for a
    device without a node or a CPU on the device's node.

    >>> t = Topology("t", nodes={0: Node(0, 1), 1: Node(1, 2)}, distances=[[10, 32], [32, 10]])
    >>> remote_factor(t, 0, 1, 0.5), remote_factor(t, 1, 1, 0.5), remote_factor(t, 0, -1, 0.5)
    (2.1, 1.0, 1.0)
    """
    if dev_node < 0 or cpu_node < 0 or cpu_node == dev_node:
        return 1.0
    if dev_node not in topo.nodes or cpu_node not in topo.nodes:
        return 1.0
    d = topo.distance(cpu_node, dev_node)
    return 1.0 + alpha * (d / 10.0 - 1.0)


# -- the event engine ----------------------------------------------------------

_RUN, _SLEEP, _BLOCK, _IDLE, _DONE = "run", "sleep", "block", "idle", "done"


class _Completion:
    __slots__ = ("done", "waiters")

    def __init__(self):
        self.done = False
        self.waiters: list[_Thread] = []


class _Thread:
    __slots__ = ("tid", "name", "kind", "cpu", "allowed", "pod", "gen", "state", "remaining",
                 "wake_at", "cpu_since_wake", "pool", "counted", "intensive", "waiting_on",
                 "seg_factor", "moves", "rec", "recent")

    def __init__(self, tid, name, kind, cpu, allowed, pool=None, pod=0):
        self.tid = tid
        self.name = name
        self.kind = kind
        self.cpu = cpu
        self.allowed = allowed
        self.pod = pod or allowed
        self.pool = pool
        self.gen: Iterator | None = None
        self.state = _IDLE
        self.remaining = 0.0
        self.wake_at = math.inf
        self.cpu_since_wake = 0.0
        self.counted = False       # counted in pool.nr_running (bound pools)
        self.intensive = False
        self.waiting_on: _Completion | None = None
        self.moves = 0
        self.rec: ProbeRecord | None = None     # the probe this thread is running
        self.recent = -1           # p->recent_used_cpu (select_idle_sibling())

    @property
    def is_wq_worker(self) -> bool:   # PF_WQ_WORKER
        return self.kind in ("bound kworker", "unbound kworker")


class _BoundPool:
    """A per-CPU worker pool (normal priority) of ``system_percpu_wq``."""

    def __init__(self, cpu):
        self.cpu = cpu
        self.worklist: deque = deque()
        self.workers: list[_Thread] = []
        self.nr_running = 0


class _UnboundPool:
    def __init__(self, pool_id, pod):
        self.pool_id = pool_id
        self.pod = pod
        self.allowed = pod
        self.node = -1
        self.workers: list[_Thread] = []


class _Work:
    __slots__ = ("body", "completion", "wq", "pool")

    def __init__(self, body, wq, pool):
        self.body = body            # callable(worker_thread) -> generator
        self.completion = _Completion()
        self.wq = wq
        self.pool = pool


class _Sim:
    def __init__(self, topo: Topology, policy: str, params: Params, seed: int):
        self.topo = topo
        self.policy = policy
        self.p = params
        self.rng = np.random.default_rng(seed)
        self.now = 0.0
        self.threads: list[_Thread] = []
        self.records: list[ProbeRecord] = []
        online = topo.online or topo.present or topo.possible or sum(1 << c for c in topo.cpus)
        self.online = online
        self.nr_cpu_ids = topo.nr_cpu_ids or online.bit_length()
        self.hk = Housekeeping(possible=topo.possible or online, isolcpus=params.isolcpus,
                               nohz_full=params.nohz_full)
        self.hk_domain = housekeeping_cpumask(self.hk, HK_TYPE_DOMAIN) & online or online
        self.kernel = POLICY_KERNEL[policy]
        self.wq_unbound = wq_unbound_cpumask(topo, self.hk, self.kernel)
        self.bound_pools: dict[int, _BoundPool] = {}
        self.unbound_pools: dict[tuple[str, int], _UnboundPool] = {}
        self.wq_active: dict[tuple[str, int], int] = {}   # (wq, pool node) -> active items
        self.wq_pending: dict[str, deque] = {}
        self.kernel = POLICY_KERNEL[policy]
        self.load = {c: 0 for c in _cpus(online)}       # runnable threads per CPU
        self.rq: dict[int, list[_Thread]] = {c: [] for c in self.load}   # head runs
        self.slice_left = {c: params.timeslice_ms for c in self.load}
        self.siblings = {c: ((self.topo.cpus[c].thread_siblings if c in self.topo.cpus else 0)
                             & ~(1 << c)) for c in self.load}
        self.lock_owner: _Thread | None = None   # the machine-wide lock of Device.serial
        self.lock_waiters: deque = deque()
        self.pci_wq_inflight: list[_Completion] = []   # work queued on pci_probe_wq
        self.watch_mask, self.watch_from = 0, math.inf  # newly isolated CPUs, since when
        self.partition: dict[str, float] = {}
        self._iso_after: set[str] = set()
        bg = params.background
        if isinstance(bg, Mapping):
            self.bg = {c: float(bg.get(c, 0.0)) for c in self.load}
        else:
            self.bg = {c: float(bg) for c in self.load}
        self.rr_unbound = 0
        self.distribute_prev: dict[int, int] = {}   # per waking CPU (lib/cpumask.c)
        self.tick_ms = 1000.0 / params.hz if params.hz else 0.0

    # -- helpers ----------------------------------------------------------------
    def node_of(self, cpu: int) -> int:
        return self.topo.cpu_to_node(cpu)

    def _llc(self, cpu: int) -> int:
        c = self.topo.cpus.get(cpu)
        return (c.llc_cpus if c and c.llc_cpus else self.topo.cpumask_of_node(self.node_of(cpu)))

    def _pick(self, cands: list[int]) -> int:
        if len(cands) == 1:
            return cands[0]
        return cands[int(self.rng.integers(len(cands)))]

    def _idle(self, c: int) -> bool:
        """``available_idle_cpu()``: nothing runnable, no background load."""
        return self.load.get(c, 0) == 0 and self.bg.get(c, 0.0) == 0

    def _place(self, t: _Thread) -> int:
        """Where ``t`` runs when it wakes: the kernel's path or the model's rule
        (``Params.wakeup``; see the module docstring)."""
        if self.p.wakeup == "node":
            return self._place_node(t.cpu, t.allowed, t.pod)
        prev = t.cpu
        if prev is None or not (t.allowed >> prev) & 1:
            # select_fallback_rq(): the previous CPU is no longer allowed
            prev = _cpus(t.pod & t.allowed or t.allowed)[0]
        return self.select_idle_sibling(t, prev, prev)

    def select_idle_sibling(self, t: _Thread, prev: int, target: int) -> int:
        """``select_idle_sibling()`` of Linux 6.12/7.2 (fair.c 6.12:7937,
        7.2:9027) for a symmetric machine without clusters: the target if
        idle; the task's recently used CPU if idle and in the target's LLC;
        then a scan of ``sd_llc`` (the LLC's CPUs in the target's scheduling
        domain) from ``target + 1``, with wrap; else the target, busy.
        Input: the waking thread (its allowed CPUs and ``recent``), its
        previous CPU and the target. Output: a CPU."""
        if self._idle(target):
            return target
        # prev == target here (wake_affine() kept prev_cpu), so the "cache
        # affine prev" and per-CPU-kthread steps add nothing
        recent, t.recent = t.recent, prev
        if (recent >= 0 and recent != prev and recent != target
                and (self._llc(target) >> recent) & 1 and self._idle(recent)
                and (t.allowed >> recent) & 1):
            return recent
        if not (self.hk_domain >> target) & 1:
            return target            # an isolated CPU has no sd_llc
        span = self._llc(target) & self.hk_domain
        cpus = span & t.allowed
        smt = any(self.siblings.values())
        has_idle_core = False
        if smt:
            # test_idle_cores(): the LLC's hint, taken as exact
            has_idle_core = any(self._idle(c) and all(self._idle(x) for x in _cpus(self.siblings[c]))
                                for c in _cpus(span))
            if not has_idle_core and (self._llc(target) >> prev) & 1:
                # select_idle_smt(): an idle SMT sibling of prev in the domain
                for c in _cpus((self.siblings[prev]) & t.allowed & span):
                    if self._idle(c):
                        return c
        if not cpus:
            return target
        order = [c for c in _cpus(span) if c > target] + [c for c in _cpus(span) if c <= target]
        idle_cpu = -1
        for c in order:                       # for_each_cpu_wrap(cpu, cpus, target + 1)
            if not (cpus >> c) & 1:
                continue
            if has_idle_core:                 # select_idle_core()
                core_idle = True
                for x in _cpus(self.siblings[c] | (1 << c)):
                    if not self._idle(x):
                        core_idle = False
                        if idle_cpu == -1:
                            continue
                        break
                    if idle_cpu == -1 and (cpus >> x) & 1:
                        idle_cpu = x
                if core_idle:
                    return c
                cpus &= ~(self.siblings[c] | (1 << c))
            elif self._idle(c):
                return c
        return idle_cpu if idle_cpu >= 0 else target

    def kick_pool_cpu(self, pod: int, waker: int) -> int:
        """``cpumask_any_and_distribute(pod, cpu_online_mask)`` as
        ``kick_pool()`` calls it: the next online pod CPU after the waking
        CPU's cursor (``distribute_cpu_mask_prev``), with wrap."""
        prev = self.distribute_prev.get(waker, 0)
        cands = _cpus(pod & self.online)
        nxt = next((c for c in cands if c > prev), cands[0])
        self.distribute_prev[waker] = nxt
        return nxt

    def _place_node(self, prev: int | None, allowed: int, pod: int) -> int:
        """The model's node-wide rule (``wakeup="node"``), not the kernel's."""
        def cost(c):
            return self.load.get(c, 0) + self.bg.get(c, 0.0)
        if prev is not None and (allowed >> prev) & 1 and cost(prev) == 0:
            return prev
        ref = prev if prev is not None and (allowed >> prev) & 1 else None
        anchor = ref if ref is not None else next(iter(_cpus(pod & allowed)), None)
        if anchor is None:
            anchor = _cpus(allowed)[0]
        node_mask = self.topo.cpumask_of_node(self.node_of(anchor)) & allowed or allowed
        scopes = [pod & allowed, self._llc(anchor) & allowed, node_mask]
        for m in scopes:
            idle = [c for c in _cpus(m) if cost(c) == 0]
            if idle:
                # select_idle_core(): an idle CPU whose SMT siblings are idle too first
                # (which names a core by its first thread)
                cores = [c for c in idle if all(cost(x) == 0 for x in _cpus(self.siblings[c]))
                         and not self.siblings[c] & ((1 << c) - 1)]
                return self._pick(cores or idle)
        # Nothing idle on the node: stay on the node (the load balancer keeps
        # a small imbalance rather than move work off its memory), on its
        # least-loaded CPU, the previous one when it is among them.
        cands = _cpus(node_mask)
        least = min(cost(c) for c in cands)
        if ref is not None and (node_mask >> ref) & 1 and cost(ref) == least:
            return ref
        return self._pick([c for c in cands if cost(c) == least])

    def new_thread(self, name, kind, cpu, allowed, pool=None, pod=0) -> _Thread:
        t = _Thread(len(self.threads), name, kind, cpu, allowed, pool, pod)
        self.threads.append(t)
        return t

    # -- thread state changes ---------------------------------------------------
    def _to_run(self, t: _Thread, ms: float, factor=None):
        if t.state != _RUN:
            if t.kind != "bound kworker":
                c = self._place(t)
                if c != t.cpu:
                    t.moves += 1
                t.cpu = c
            self.load[t.cpu] += 1
            q = self.rq[t.cpu]
            q.append(t)
            if len(q) == 1:
                self.slice_left[t.cpu] = self.p.timeslice_ms
            t.cpu_since_wake = 0.0
            if isinstance(t.pool, _BoundPool) and not t.intensive and not t.counted:
                t.pool.nr_running += 1
                t.counted = True
            t.state = _RUN
        # the remote factor depends on where the scheduler just put the thread
        t.remaining = ms * (factor(t) if factor else 1.0)

    def _dequeue(self, t: _Thread):
        self.load[t.cpu] -= 1
        q = self.rq[t.cpu]
        head = q[0] is t
        q.remove(t)
        if head:
            self.slice_left[t.cpu] = self.p.timeslice_ms

    def _leave_run(self, t: _Thread, state: str):
        if t.state == _RUN:
            self._dequeue(t)
        t.state = state
        if t.counted:
            t.counted = False
            t.pool.nr_running -= 1
            self._kick_bound(t.pool)

    def _advance(self, t: _Thread, value=None):
        """Run ``t``'s body until it asks for time to pass."""
        while True:
            try:
                cmd = t.gen.send(value)
            except StopIteration:
                self._thread_body_done(t)
                return
            value = None
            kind = cmd[0]
            if kind == "cpu":
                if cmd[1] <= _EPS:
                    continue
                self._to_run(t, cmd[1], cmd[2] if len(cmd) > 2 else None)
                return
            if kind == "sleep":
                if cmd[1] <= _EPS:
                    continue
                self._leave_run(t, _SLEEP)
                t.wake_at = self.now + cmd[1]
                return
            if kind == "wait":
                comp: _Completion = cmd[1]
                if comp.done:
                    continue
                self._leave_run(t, _BLOCK)
                t.waiting_on = comp
                comp.waiters.append(t)
                return
            if kind == "now":            # let the body read the clock and its CPU
                value = (self.now, t)
                continue
            if kind == "lock":           # mutex_lock() of the machine-wide lock
                if self.lock_owner is None:
                    self.lock_owner = t
                    continue
                self._leave_run(t, _BLOCK)
                self.lock_waiters.append(t)
                return
            if kind == "unlock":         # mutex_unlock(): hand over to the first waiter
                self.lock_owner = None
                if self.lock_waiters:
                    w = self.lock_waiters.popleft()
                    self.lock_owner = w
                    w.state, w.wake_at = _SLEEP, math.inf
                    self._advance(w)
                continue
            raise AssertionError(cmd)

    def _complete(self, comp: _Completion):
        comp.done = True
        waiters, comp.waiters = comp.waiters, []
        for w in waiters:
            w.waiting_on = None
            w.state = _SLEEP         # not running; _advance decides what is next
            w.wake_at = math.inf
            self._advance(w)

    # -- workqueues ---------------------------------------------------------------
    def _thread_body_done(self, t: _Thread):
        if t.tid not in self._current_work:      # a udev worker or the cpuset writer
            self._leave_run(t, _DONE)
            return
        # A kworker finished its work item: it goes idle (and may be reused),
        # then whoever flushes the item is woken, then the pool moves on.
        w = self._current_work.pop(t.tid)
        if t.state == _RUN:
            self._dequeue(t)
        t.state = _IDLE
        t.intensive = False
        if t.counted:
            t.counted = False
            t.pool.nr_running -= 1
        if isinstance(w.pool, _UnboundPool):
            self.wq_active[(w.wq, w.pool.node)] -= 1
        if w.completion in self.pci_wq_inflight:
            self.pci_wq_inflight.remove(w.completion)
        self._complete(w.completion)
        if isinstance(w.pool, _BoundPool):
            self._kick_bound(w.pool)
        else:
            self._start_pending_unbound(w.wq)

    def work_on_cpu(self, cpu: int, body, wq: str = "system_percpu_wq") -> _Completion:
        """``work_on_cpu()`` (or 7.2's ``queue_work_on(cpu, pci_probe_wq)``):
        queue on the bound pool of ``cpu``; the caller waits (``flush_work()``)."""
        pool = self.bound_pools.get(cpu)
        if pool is None:
            pool = self.bound_pools[cpu] = _BoundPool(cpu)
        w = _Work(body, wq, pool)
        if wq == PCI_PROBE_WQ:
            self.pci_wq_inflight.append(w.completion)
        pool.worklist.append(w)
        self._kick_bound(pool)
        return w.completion

    def _kick_bound(self, pool: _BoundPool):
        # Concurrency management: start the next item only while no worker of
        # the pool is running (need_more_worker()).
        while pool.worklist and pool.nr_running == 0:
            w = pool.worklist.popleft()
            worker = next((x for x in pool.workers if x.state == _IDLE), None)
            if worker is None:
                worker = self.new_thread(f"kworker/{pool.cpu}:{len(pool.workers) + 1}",
                                         "bound kworker", pool.cpu, 1 << pool.cpu, pool)
                pool.workers.append(worker)
            self._start_work(worker, w)

    def queue_work_node(self, node: int, wq: str, body, from_cpu: int) -> _Completion:
        """``queue_work_node()`` on an unbound workqueue."""
        target = select_numa_node_cpu(self.topo, node, from_cpu)
        if target == WORK_CPU_UNBOUND:
            target = self._wq_select_unbound_cpu(from_cpu)
        pod = unbound_pod_cpus(self.topo, target, self.p.affinity_scope) & self.wq_unbound
        if not pod:
            pod = self.wq_unbound        # the pod has no allowed CPU: default pwq
        key = (wq, pod, self.wq_unbound)     # pools are per attrs: pod and cpumask
        pool = self.unbound_pools.get(key)
        if pool is None:
            pool = self.unbound_pools[key] = _UnboundPool(
                2 * self.nr_cpu_ids + len(self.unbound_pools), pod)
            pool.allowed = self.wq_unbound
            nodes = {self.node_of(c) for c in _cpus(pod)}
            pool.node = nodes.pop() if len(nodes) == 1 else -1   # NUMA_NO_NODE
        w = _Work(body, wq, pool)
        self.wq_pending.setdefault(wq, deque()).append((w, target, from_cpu))
        self._start_pending_unbound(wq)
        return w.completion

    def _wq_select_unbound_cpu(self, cpu: int) -> int:
        # wq_select_unbound_cpu(): the local CPU if allowed, else round robin.
        if (self.wq_unbound >> cpu) & 1:
            return cpu
        allowed = _cpus(self.wq_unbound)
        self.rr_unbound = (self.rr_unbound + 1) % len(allowed)
        return allowed[self.rr_unbound]

    def wq_max_active(self, wq: str, node: int) -> int:
        """The node's share of ``wq``'s ``max_active`` (Linux 6.9+)."""
        mx = (self.p.max_active if self.p.max_active is not None
              else workqueue_max_active(wq, self.kernel))
        if node < 0:
            return mx
        total = bin(self.wq_unbound).count("1")
        node_cpus = bin(self.wq_unbound & self.topo.cpumask_of_node(node)).count("1")
        return wq_node_max_active(mx, node_cpus, total)

    def _start_pending_unbound(self, wq: str):
        q = self.wq_pending.get(wq)
        if not q:
            return
        waiting = deque()
        while q:
            w, target, waker = q.popleft()
            key = (wq, w.pool.node)
            if self.wq_active.get(key, 0) >= self.wq_max_active(wq, w.pool.node):
                waiting.append((w, target, waker))   # inactive until an item of its node ends
                continue
            self.wq_active[key] = self.wq_active.get(key, 0) + 1
            pool = w.pool
            worker = next((x for x in pool.workers if x.state == _IDLE), None)
            if worker is None:
                worker = self.new_thread(f"kworker/u{pool.pool_id}:{len(pool.workers) + 1}",
                                         "unbound kworker", None, pool.allowed, pool, pool.pod)
                pool.workers.append(worker)
            # kick_pool(): a non-strict pod sets the wake CPU inside the pod
            # (cpumask_any_and_distribute(); a seeded draw under "node"). When the target's
            # pod has no allowed CPU (say, the node's first CPUs are isolated:
            # select_numa_node_cpu() ignores housekeeping), the pod is every
            # allowed CPU, and the worker may start on another node.
            if worker.cpu is None or not (pool.pod >> worker.cpu) & 1:
                if self.p.wakeup == "node":
                    worker.cpu = target if (pool.pod >> target) & 1 else self._pick(_cpus(pool.pod))
                else:
                    # kick_pool() (a new worker is taken as woken the same way;
                    # the kernel wakes it from create_worker())
                    worker.cpu = self.kick_pool_cpu(pool.pod, waker)
            self._start_work(worker, w)
        q.extend(waiting)

    _current_work: dict

    def _start_work(self, worker: _Thread, w: _Work):
        self._current_work[worker.tid] = w
        worker.gen = w.body(worker)
        worker.state = _SLEEP      # waking up
        worker.wake_at = math.inf
        self._advance(worker)

    # -- main loop --------------------------------------------------------------
    def _speed(self, cpu: int) -> float:
        """Progress per ms of the thread at the head of ``cpu``'s run queue."""
        r = 1.0 / (1.0 + self.bg.get(cpu, 0.0))
        sib = self.siblings.get(cpu, 0)
        if sib and self.p.smt_factor < 1.0 and any(self.rq.get(c) for c in _cpus(sib)):
            r *= self.p.smt_factor
        return r

    def run(self):
        thresh = self.p.cpu_intensive_thresh_ms
        ts = self.p.timeslice_ms
        tick = self.tick_ms
        while True:
            executing = [q[0] for q in self.rq.values() if q]
            sleeping = [t for t in self.threads if t.state == _SLEEP and t.wake_at < math.inf]
            if not executing and not sleeping:
                break
            dt = math.inf
            rate = {}
            for t in executing:
                r = self._speed(t.cpu)
                rate[t.tid] = r
                dt = min(dt, t.remaining / r)
                if len(self.rq[t.cpu]) > 1:
                    dt = min(dt, self.slice_left[t.cpu])
                if t.counted and not t.intensive:
                    cross = max(thresh - t.cpu_since_wake, 0.0) / r
                    if tick:
                        # wq_worker_tick(): checked at the first tick after crossing
                        cross = math.ceil((self.now + cross - _EPS) / tick) * tick - self.now
                    dt = min(dt, max(cross, 0.0))
            for t in sleeping:
                dt = min(dt, t.wake_at - self.now)
            dt = max(dt, 0.0)
            self.now += dt
            for t in executing:
                used = rate[t.tid] * dt
                t.remaining -= used
                t.cpu_since_wake += used
                self.slice_left[t.cpu] -= dt
                if (self.watch_mask >> t.cpu) & 1 and self.now > self.watch_from + _EPS:
                    self.partition["isolated_cpu_ms_after"] = (
                        self.partition.get("isolated_cpu_ms_after", 0.0) + used)
                    if t.rec is not None:
                        self._iso_after.add(t.rec.device)
            # events, in thread-creation order (deterministic)
            for t in executing:
                if t.state != _RUN:
                    continue
                on_tick = not tick or abs(self.now / tick - round(self.now / tick)) * tick <= 1e-7
                if t.counted and not t.intensive and t.cpu_since_wake >= thresh - _EPS \
                        and t.remaining > _EPS and on_tick:
                    t.intensive = True
                    t.counted = False
                    t.pool.nr_running -= 1
                    self._kick_bound(t.pool)
                if t.remaining <= _EPS * max(1.0, self.now):
                    t.remaining = 0.0
                    self._advance(t)
            for t in sleeping:
                if t.state == _SLEEP and t.wake_at <= self.now + _EPS:
                    t.wake_at = math.inf
                    self._advance(t)
            # the slice of a CPU's running thread ran out: the next one runs
            for c, q in self.rq.items():
                if self.slice_left[c] <= _EPS:
                    if len(q) > 1:
                        q.append(q.pop(0))
                    self.slice_left[c] = ts


# -- the driver core, as each policy has it ---------------------------------------

class _Kernel(_Sim):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self._current_work = {}
        self._probing_pf: set[str] = set()      # PFs inside pci_call_probe()

    def allows_async(self, dev: Device) -> bool:
        pt = PROBE_PREFER_ASYNCHRONOUS if dev.probe_type == "async" else PROBE_DEFAULT_STRATEGY
        return driver_allows_async_probing(pt, dev.driver, self.p.driver_async_probe)

    def core_redirects(self, dev: Device, async_probe: bool) -> bool:
        if self.policy == "driver-core":
            opted = True
        elif self.policy == "bus-opt-in":
            opted = dev.bus in OPT_IN_BUSES
        else:
            return False
        return probe_redirected_to_node(dev.node, node_online(self.topo, dev.node),
                                        async_probe, opted)

    def caller(self, devs: Sequence[Device]):
        def body(t: _Thread):
            for dev in devs:
                if self.allows_async(dev):
                    self.async_schedule_dev(dev, t)
                else:
                    yield from self.device_attach_sync(dev, t)
            return
            yield
        return body

    def async_schedule_dev(self, dev: Device, t: _Thread):
        rec = self._record(dev, "async")

        def helper(w: _Thread):
            # __driver_attach_async_helper(): device_lock(dev) in this worker
            rec.lock_holder = w.name
            yield from self.driver_probe_device(dev, w, rec, async_probe=True)
        self.queue_work_node(dev.node, "async", helper, t.cpu)

    def device_attach_sync(self, dev: Device, t: _Thread, parent: str = ""):
        rec = self._record(dev, "sync", parent)
        rec.lock_holder = t.name          # __device_driver_lock() in the caller
        yield from self.driver_probe_device(dev, t, rec, async_probe=False)

    def driver_probe_device(self, dev: Device, t: _Thread, rec: ProbeRecord, async_probe: bool):
        if self.core_redirects(dev, async_probe):
            # __driver_probe_device_node(): queue_work_node() + flush_work()
            comp = self.queue_work_node(dev.node, "system_dfl_wq",
                                        lambda w: self.really_probe(dev, w, rec), t.cpu)
            yield ("wait", comp)
        else:
            yield from self.really_probe(dev, t, rec)

    def really_probe(self, dev: Device, t: _Thread, rec: ProbeRecord):
        if dev.bus == "pci" and self.policy in ("mainline", "mainline-7.2", "pf-wq-worker"):
            yield from self.pci_call_probe(dev, t, rec)
        else:
            yield from self.local_probe(dev, t, rec)

    def pci_call_probe(self, dev: Device, t: _Thread, rec: ProbeRecord):
        cpu = pci_call_probe_cpu(
            self.topo, self.hk, dev.node, is_virtfn=dev.is_vf,
            physfn_is_probed=rec.parent in self._probing_pf,
            in_wq_worker=t.is_wq_worker, pf_wq_worker_fix=(self.policy == "pf-wq-worker"),
            kernel=self.kernel)
        self._probing_pf.add(dev.name)        # dev->is_probed = 1
        try:
            if cpu < self.nr_cpu_ids:
                # 6.12: work_on_cpu(); 7.2: queue_work_on(cpu, pci_probe_wq), elected and
                # queued in one RCU read section (one instant here), then flush_work()
                wq = PCI_PROBE_WQ if self.kernel == "7.2" else "system_percpu_wq"
                comp = self.work_on_cpu(cpu, lambda w: self.local_probe(dev, w, rec), wq)
                yield ("wait", comp)
            else:
                yield from self.local_probe(dev, t, rec)
        finally:
            self._probing_pf.discard(dev.name)

    def local_probe(self, dev: Device, t: _Thread, rec: ProbeRecord):
        now, _ = yield ("now",)
        rec.start = now
        rec.thread, rec.thread_kind = t.name, t.kind
        rec.holds_device_lock = (rec.lock_holder == t.name)
        if dev.bus in NEED_PARENT_LOCK_BUSES:
            rec.holds_parent_lock = rec.holds_device_lock   # both taken by the same thread
        outer_rec, t.rec = t.rec, rec
        first = True
        moves0 = t.moves
        seg = dev.cpu_ms / dev.rounds
        for _ in range(dev.rounds):
            if dev.cpu_ms > 0:
                def factor(th, dev=dev):
                    f = remote_factor(self.topo, self.node_of(th.cpu), dev.node, self.p.alpha)
                    if f > 1.0:
                        rec.remote = True
                    return f
                if dev.serial > 0:
                    yield ("lock",)
                    yield ("cpu", seg * dev.serial, factor)
                    yield ("unlock",)
                yield ("cpu", seg * (1.0 - dev.serial), factor)
            if first:
                first = False
                rec.cpu = t.cpu
                rec.cpu_node = self.node_of(t.cpu)
            if dev.wait_ms > 0:
                yield ("sleep", dev.wait_ms / dev.rounds)
        if rec.cpu < 0:
            rec.cpu, rec.cpu_node = t.cpu, self.node_of(t.cpu)
        for vf in dev.vfs:
            yield from self.device_attach_sync(vf, t, parent=dev.name)
        now, _ = yield ("now",)
        rec.end = now
        rec.migrations = t.moves - moves0
        t.rec = outer_rec

    def cpuset_writer(self, at_ms: float, cpus: int):
        """A write to a cpuset isolated partition at ``at_ms``: Linux 7.2's
        ``housekeeping_update()``, with or without ``pci_probe_flush_workqueue()``."""
        def body(t: _Thread):
            yield ("sleep", at_ms)
            self.partition["at_ms"] = self.now
            for step in housekeeping_update_steps(pci_flush=(self.policy == "mainline-7.2")):
                if step == "rcu_assign_pointer":
                    self.hk = housekeeping_update(self.hk, cpus, self.online)
                    self.hk_domain = housekeeping_cpumask(self.hk, HK_TYPE_DOMAIN) & self.online
                elif step == "pci_probe_flush_workqueue":
                    for comp in list(self.pci_wq_inflight):   # flush_workqueue()
                        yield ("wait", comp)
                elif step == "workqueue_unbound_housekeeping_update":
                    self.wq_unbound = wq_unbound_cpumask(self.topo, self.hk, self.kernel)
                # synchronize_rcu() and the other steps take no modelled time
            now, _ = yield ("now",)
            self.partition["returned_ms"] = now
            self.partition.setdefault("isolated_cpu_ms_after", 0.0)
            self.watch_mask, self.watch_from = cpus, now
        return body

    def _record(self, dev: Device, mode: str, parent: str = "") -> ProbeRecord:
        rec = ProbeRecord(device=dev.name, bus=dev.bus, dev_node=dev.node, policy=self.policy,
                          mode=mode, parent=parent, queued=self.now)
        self.records.append(rec)
        return rec


def _check_devices(topo: Topology, devices: Sequence[Device]) -> None:
    seen = set()

    def walk(ds):
        for d in ds:
            if d.name in seen:
                raise ProbeModelError(f"device name {d.name!r} appears twice")
            seen.add(d.name)
            if d.node >= 0 and d.node not in topo.nodes:
                raise ProbeModelError(f"{d.name}: node {d.node} is not a node of {topo.name} "
                                      f"(nodes: {', '.join(map(str, topo.node_ids)) or 'none'})")
            walk(d.vfs)
    walk(devices)


def simulate(topo: Topology, devices: Sequence[Device], policy: str, seed: int = 0,
             params: Params | None = None) -> ProbeRun:
    """Probe ``devices`` on ``topo`` under ``policy``; return every probe's record.

    Example: three asynchronous NVMe probes on node 0, before and after the fix

    >>> t = machine(nodes=2, cpus_per_node=8)
    >>> devs = [Device(f"nvme{i}", node=0, probe_type="async", cpu_ms=10, wait_ms=20)
    ...         for i in range(3)]
    >>> a = simulate(t, devs, "mainline"); b = simulate(t, devs, "pf-wq-worker")
    >>> sorted({p.cpu for p in a.probes}), len({p.cpu for p in b.probes})
    ([0], 3)
    >>> a.makespan > b.makespan
    True
    """
    pol = policy_name(policy)
    params = Params() if params is None else params
    if not isinstance(params, Params):
        raise ProbeModelError(f"params must be a Params, not {type(params).__name__}")
    _seed(seed, error=ProbeModelError)
    if isinstance(devices, (str, bytes)) or not all(isinstance(d, Device) for d in devices):
        raise ProbeModelError("devices must be a sequence of Device")
    if not topo.cpus and not topo.nodes:
        raise ProbeModelError(f"{topo.name}: the topology has no CPUs")
    _check_devices(topo, devices)
    k = _Kernel(topo, pol, params, seed)
    drivers: dict[str, list[Device]] = {}
    for d in devices:
        drivers.setdefault(d.driver, []).append(d)
    if params.partition_cpus:
        if POLICY_KERNEL[pol] != "7.2":
            raise ProbeModelError(f"a runtime cpuset partition is modelled for the 7.2-based "
                                  f"policies (mainline-7.2, driver-core, bus-opt-in), not {pol}")
        if params.partition_cpus & ~k.online:
            raise ProbeModelError("partition_cpus names CPUs that are not online")
        try:
            housekeeping_update(k.hk, params.partition_cpus, k.online)
        except ValueError as e:
            raise ProbeModelError(str(e)) from None
        w = k.new_thread("(cpuset-writer)", "cpuset writer", _cpus(k.hk_domain)[0], k.hk_domain)
        w.gen = k.cpuset_writer(params.partition_at_ms, params.partition_cpus)(w)
        w.state = _SLEEP
        k._advance(w)      # before the callers: a write at 0 ms precedes every probe
    udev_cpus = _cpus(k.hk_domain)
    for i, (drv, devs) in enumerate(drivers.items()):
        cpu = udev_cpus[int(k.rng.integers(len(udev_cpus)))]
        if drv in params.caller_cpu:
            cpu = params.caller_cpu[drv]
            if cpu not in k.load:
                raise ProbeModelError(f"caller CPU {cpu} of {drv} is not an online CPU")
        t = k.new_thread(f"(udev-worker)#{i + 1}", "udev worker", cpu, k.hk_domain)
        t.gen = k.caller(devs)(t)
        t.state = _SLEEP
        k._advance(t)
    k.run()
    unfinished = [r.device for r in k.records if math.isnan(r.end)]
    if unfinished:   # a modelling bug, never an input error
        raise AssertionError(f"probes never finished: {unfinished}")
    part = dict(k.partition)
    if part:
        part["probes_on_isolated_after"] = len(k._iso_after)
    return ProbeRun(pol, seed, k.records, part)


# -- machines and sweeps ---------------------------------------------------------

def machine(nodes: int = 2, cpus_per_node: int = 16, llc_size: int = 8, smt: int = 1,
            distance: int = 32, name: str | None = None) -> Topology:
    """A simple machine for sweeps: ``nodes`` nodes of ``cpus_per_node`` CPUs
    numbered node after node, last-level caches of ``llc_size`` CPUs, SLIT
    ``distance`` between nodes.

    >>> t = machine(2, 4, llc_size=2)
    >>> t.cpumask_of_node(1), t.cpus[5].llc_cpus, t.distance(0, 1)
    (240, 48, 32)
    """
    from ...cpumask import MAX_CPUS
    err = ProbeModelError
    for what, v in (("nodes", nodes), ("cpus_per_node", cpus_per_node), ("llc_size", llc_size),
                    ("smt", smt)):
        integer(f"machine(): {what}", v, 1, MAX_CPUS, error=err)
    if nodes * cpus_per_node > MAX_CPUS:
        raise ProbeModelError(f"machine(): {nodes} x {cpus_per_node} CPUs is more than "
                              f"{MAX_CPUS}")
    integer("machine(): distance", distance, 10, 255, error=err)
    n = nodes * cpus_per_node
    cpus = {}
    for i in range(n):
        node = i // cpus_per_node
        base = node * cpus_per_node
        llc0 = base + ((i - base) // llc_size) * llc_size
        llc_end = min(llc0 + llc_size, base + cpus_per_node)
        llc = ((1 << (llc_end - llc0)) - 1) << llc0
        sib0 = base + ((i - base) // smt) * smt
        sib = ((1 << min(smt, base + cpus_per_node - sib0)) - 1) << sib0
        cpus[i] = CPU(i, node=node, package=node, core=(i - base) // smt, thread_siblings=sib,
                      cluster_cpus=sib, llc_cpus=llc, l2_cpus=sib,
                      package_cpus=((1 << cpus_per_node) - 1) << base,
                      die_cpus=((1 << cpus_per_node) - 1) << base, cluster_source="synthetic")
    allm = (1 << n) - 1
    node_objs = {k: Node(k, ((1 << cpus_per_node) - 1) << (k * cpus_per_node))
                 for k in range(nodes)}
    dist = [[10 if a == b else distance for b in range(nodes)] for a in range(nodes)]
    return Topology(name or f"{nodes}x{cpus_per_node}", source="numalab.models.probe.sim.machine",
                    arch="x86", possible=allm, present=allm, online=allm, cpus=cpus,
                    nodes=node_objs, distances=dist)


def isolate_share(topo: Topology, share: float) -> int:
    """The mask isolating the *first* ``share`` of each node's CPUs (the
    CPUs ``pci_call_probe()`` would otherwise pick first).

    >>> isolate_share(machine(2, 4), 0.5)
    51
    """
    number("isolated share", share, 0, 1, hi_open=True, error=ProbeModelError)
    m = 0
    for n in topo.node_ids:
        cs = _cpus(topo.cpumask_of_node(n))
        for c in cs[: int(round(share * len(cs)))]:
            m |= 1 << c
    return m


def thread_table(topo: Topology | None = None, seed: int = 0) -> "Any":
    """Which thread runs ``probe()``, per policy and kind of device.

    One simulated probe of each kind (async PCI, sync PCI, VF of a sync PCI
    PF, USB with a node, USB without, platform) per policy; columns policy,
    case, thread_kind, cpu_on_device_node, holds_device_lock, holds_parent_lock
    (USB: ``need_parent_lock``). Computed, not typed in.
    """
    import pandas as pd
    topo = topo or machine(2, 8)
    cases = {
        "async PCI (nvme)": [Device("nvme0", "pci", 1, "async", 5, 5)],
        "sync PCI (mlx5)": [Device("mlx5_0", "pci", 1, "sync", 5, 5)],
        "VF from PF probe": [Device("pf0", "pci", 1, "sync", 5, 5,
                                    vfs=(Device("vf0", "pci", 1, "sync", 5, 5, is_vf=True,
                                                driver="vfdrv"),))],
        "USB, node set": [Device("usb0", "usb", 1, "sync", 1, 1)],
        "USB/platform, no node": [Device("plat0", "platform", -1, "sync", 1, 1)],
    }
    rows = []
    for pol in POLICIES:
        for case, devs in cases.items():
            run = simulate(topo, devs, pol, seed=seed)
            for p in run.probes:
                if case == "VF from PF probe" and not p.parent:
                    continue
                rows.append({"policy": pol, "case": case, "thread_kind": p.thread_kind,
                             "cpu_on_device_node": (p.dev_node < 0) or p.cpu_node == p.dev_node,
                             "holds_device_lock": p.holds_device_lock,
                             "holds_parent_lock": p.holds_parent_lock})
    return pd.DataFrame(rows)


def partition_change(topo: Topology, devices: Sequence[Device], cpus: int, at_ms: float,
                     policies: Iterable[str] = ("mainline-7.2", "driver-core"),
                     seeds: Iterable[int] = range(5), params: Params | None = None):
    """A cpuset isolated partition taking ``cpus`` at ``at_ms`` while ``devices``
    probe: with 7.2's flush hook (``mainline-7.2``) and without it (the
    series, ``driver-core``), over ``seeds``.

    Output: a DataFrame, one row per (policy, seed): returned_ms (when the
    partition write returned), write_ms (how long it took), isolated_cpu_ms_after
    (probe CPU time run on the newly isolated CPUs after it returned),
    probes_on_isolated_after and makespan_ms.

    >>> t = machine(2, 4, llc_size=4)
    >>> devs = [Device(f"nvme{i}", "pci", 0, "async", 10, 10, 2, driver="nvme") for i in range(3)]
    >>> df = partition_change(t, devs, cpus=0b11, at_ms=1.0, seeds=[0])
    >>> float(df.set_index("policy").isolated_cpu_ms_after["mainline-7.2"])
    0.0
    """
    import pandas as pd
    base = Params() if params is None else params
    rows = []
    for pol in policies:
        for s in seeds:
            run = simulate(topo, devices, pol, seed=s,
                           params=dataclasses.replace(base, partition_cpus=cpus,
                                                      partition_at_ms=at_ms))
            part = run.partition
            rows.append({"policy": policy_name(pol), "seed": s,
                         "returned_ms": part["returned_ms"],
                         "write_ms": part["returned_ms"] - part["at_ms"],
                         "isolated_cpu_ms_after": part["isolated_cpu_ms_after"],
                         "probes_on_isolated_after": part["probes_on_isolated_after"],
                         "makespan_ms": run.makespan})
    return pd.DataFrame(rows)


def scaling_bands(by_rounds: Mapping[int, tuple[float, float, float]],
                  devices_per_node: Iterable[int], alphas: Iterable[float] = (0.5,),
                  serials: Iterable[float] = (0.0,), cpus_per_node: int = 128, nodes: int = 2,
                  policy: str = "pf-wq-worker", seed: int = 0, llc_size: int = 8,
                  wakeups: Iterable[str] = ("llc",), hzs: Iterable[int] = (HZ_DEFAULT,)):
    """Speedup of ``policy`` over mainline in boot probing time (makespan), and
    the per-probe times, over every fitted round count (``by_rounds``: rounds
    -> (rms, cpu_ms, wait_ms), as :attr:`numalab.models.probe.calibrate.Fit.by_rounds`), every
    ``alpha``, serial share, wake-up rule (``Params.wakeup``) and ``hz``.

    Output: a DataFrame, one row per (rounds, alpha, serial, wakeup, hz,
    devices_per_node): makespan and mean per-probe time of both policies,
    speedup, and how many distinct CPUs ran the fixed policy's probes
    (``fixed_cpus``) and in how many LLCs (``fixed_llcs``).

    >>> df = scaling_bands({2: (0.02, 10.0, 10.0)}, [1, 4], cpus_per_node=8, serials=(0.0, 0.2))
    >>> bool((df[df.devices_per_node == 4].speedup > 1).all())
    True
    """
    import pandas as pd
    rows = []
    topo = machine(nodes, cpus_per_node, llc_size=min(llc_size, cpus_per_node))
    import itertools
    for (r, (_, cpu_ms, wait_ms)), a, sfr, wk, hz in itertools.product(
            sorted(by_rounds.items()), alphas, serials, wakeups, hzs):
        dev = Device("nvme", "pci", -1, "async", cpu_ms, wait_ms, r, driver="nvme", serial=sfr)
        prm = Params(alpha=a, wakeup=wk, hz=hz)
        for k in devices_per_node:
            devs = [dataclasses.replace(dev, name=f"nvme{n}.{i}", node=n)
                    for n in range(nodes) for i in range(k)]
            out = {"rounds": r, "alpha": a, "serial": sfr, "wakeup": wk, "hz": hz,
                   "devices_per_node": k}
            for tag, pol in (("mainline", "mainline"), ("fixed", policy)):
                run = simulate(topo, devs, pol, seed=seed, params=prm)
                out[f"{tag}_makespan_ms"] = run.makespan
                out[f"{tag}_probe_ms"] = float(np.mean([p.cost for p in run.probes]))
            cpus = {p.cpu for p in run.probes}
            out["fixed_cpus"] = len(cpus)
            out["fixed_llcs"] = len({topo.cpus[c].llc_cpus for c in cpus})
            out["speedup"] = out["mainline_makespan_ms"] / out["fixed_makespan_ms"]
            rows.append(out)
    return pd.DataFrame(rows)
