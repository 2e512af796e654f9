"""sched_ext in the lab: what the guest traces, the workloads it runs, and the
reader of what it recorded (format ``numalab-scx/1``).

``numalab lab run --sched-ext flat|pernode --workload W ...`` loads
``scx_simple`` (built by :mod:`numalab.lab.scxbuild`; ``pernode`` sets
``SCX_OPS_BUILTIN_IDLE_PER_NODE``) in the guest, arms kprobes on the idle-mask
code of ``kernel/sched/ext/idle.c`` and the scheduler's tracepoints, runs the
workloads between ``trace_marker`` lines, and saves the trace
(``numalab/lab/scx-trace``) and a JSON record (``numalab/lab/scx.json``).
``data/lab/README.md`` ("sched_ext runs") documents every event and field.

Probes (kprobe / kretprobe events in group ``numalab``):

* ``numalab_sel`` / ``numalab_selr`` -- ``scx_select_cpu_dfl()``: the wakee's
  pid, ``prev_cpu``, ``wake_flags``, the ``SCX_PICK_IDLE_*`` flags,
  ``nr_cpus_allowed`` and the first 64 bits of the allowed mask; the global
  and every node's idle ``cpu``/``smt`` masks at entry; every CPU's local DSQ
  length (the ``SCX_WAKE_SYNC`` branch reads the waker's); the return value.
* ``numalab_tac`` / ``numalab_tacr`` -- ``scx_idle_test_and_clear_cpu()``
  (each claim attempt: one atomic read-modify-write of an idle ``cpu`` mask).
* ``numalab_pin`` / ``numalab_pinr`` -- ``pick_idle_cpu_in_node()``.
* ``numalab_pon`` / ``numalab_ponr`` -- ``pick_idle_cpu_from_online_nodes()``.
* ``numalab_upd`` / ``numalab_updr`` -- ``__scx_update_idle(rq, idle,
  do_notify)`` with ``rq->curr``'s pid and flags, and the masks after it.

Counts are meaningful under TCG (every call is seen); timings are not, and the
trace clock is ``counter`` (a global order, no time).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field

from . import LabError

__all__ = ["FORMAT", "MODES", "WORKLOADS", "parse_workload", "probe_lines", "init_section",
           "Select", "Update", "Workload", "ScxRun", "parse_scx_trace", "read_scx",
           "WF_FORK", "WF_TTWU", "WF_SYNC", "PF_IDLE", "EBUSY", "MAX_CPUS",
           "dump_name", "scx_dumps", "run_row", "WON_NO_WAKER", "compare_ranges"]

FORMAT = "numalab-scx/1"
MODES = ("flat", "pernode")
MAX_CPUS = 64                   # the probes read the first 64 bits of each mask
WF_FORK, WF_TTWU, WF_SYNC = 0x04, 0x08, 0x10      # kernel/sched/sched.h (7.2)
PF_IDLE, PF_EXITING = 0x2, 0x4                    # include/linux/sched.h
EBUSY = 16

# name -> (argv of scxload after the name, default arguments, meaning)
WORKLOADS = {
    "pingpong": ("pingpong", "4x100", "PAIRSxITERS: pairs of processes bounce a byte over "
                                      "two pipes (WF_SYNC wakeups), unpinned"),
    "pingpong-pin": ("pingpong", "4x100", "the same, pair i on node i's CPUs"),
    "fork": ("fork", "50", "N: fork a child that exits, wait for it, N times, unpinned"),
    "fork-pin": ("fork", "50", "the same on node 0's CPUs"),
}

TRACEPOINTS = ("sched_waking", "sched_wakeup", "sched_wakeup_new", "sched_switch",
               "sched_migrate_task", "sched_process_fork", "sched_process_exit")


def parse_workload(spec: str) -> tuple[str, list[str]]:
    """``"pingpong:4x100"`` -> ``("pingpong:4x100", ["pingpong", "4", "100"])``:
    the workload's label and the ``scxload`` arguments. Raises LabError
    (one line) for an unknown name or bad numbers.

    >>> parse_workload("fork-pin")
    ('fork-pin:50', ['fork', '50', 'pin'])
    >>> parse_workload("pingpong:2x10")
    ('pingpong:2x10', ['pingpong', '2', '10'])
    >>> parse_workload("spin:3")
    Traceback (most recent call last):
    numalab.lab.LabError: --workload 'spin:3': unknown workload (pingpong, pingpong-pin, fork, fork-pin)
    """
    name, _, args = spec.strip().partition(":")
    if name not in WORKLOADS:
        raise LabError(f"--workload {spec!r}: unknown workload ({', '.join(WORKLOADS)})")
    prog, default, _ = WORKLOADS[name]
    args = args or default
    if prog == "pingpong":
        m = re.fullmatch(r"(\d{1,3})x(\d{1,6})", args)
        if not m or not int(m.group(1)) or not int(m.group(2)):
            raise LabError(f"--workload {spec!r}: pingpong takes PAIRSxITERS, e.g. 4x100")
        argv = [prog, str(int(m.group(1))), str(int(m.group(2)))]
    else:
        if not re.fullmatch(r"\d{1,6}", args) or not int(args):
            raise LabError(f"--workload {spec!r}: fork takes a count N, e.g. 50")
        argv = [prog, str(int(args))]
    if name.endswith("-pin"):
        argv.append("pin")
    return f"{name}:{args}", argv


def _mask_args(nnodes: int) -> list[str]:
    """Fetch arguments for the global and per-node idle masks (first 64 bits).

    ``scx_idle_global_masks`` is a ``struct scx_idle_cpus`` of two
    ``cpumask_var_t`` pointers (``CONFIG_CPUMASK_OFFSTACK``);
    ``scx_idle_node_masks`` points to an array of pointers to such structs.
    """
    out = ["gcpu=+0(@scx_idle_global_masks):x64", "gsmt=+0(@scx_idle_global_masks+8):x64"]
    for n in range(nnodes):
        out += [f"n{n}cpu=+0(+0(+{8 * n}(@scx_idle_node_masks))):x64",
                f"n{n}smt=+0(+8(+{8 * n}(@scx_idle_node_masks))):x64"]
    return out


def probe_lines(offsets: dict[str, int], nnodes: int) -> list[str]:
    """The ``kprobe_events`` lines, the ``numalab_sel`` one first (the guest
    appends one ``dsqC=`` argument per CPU to it: per-CPU addresses are known
    only there). ``offsets``: the byte offsets of
    :data:`numalab.lab.scxbuild.OFFSETS`.

    >>> lines = probe_lines({"TASK_PID": 8, "TASK_FLAGS": 4, "TASK_NR_CPUS_ALLOWED": 12,
    ...     "TASK_CPUS_PTR": 16, "RQ_CPU": 20, "RQ_CURR": 24, "RQ_SCX_LOCAL_DSQ_NR": 28,
    ...     "SCX_IDLE_CPUS_SMT": 8}, 2)
    >>> lines[0].split()[:4]
    ['p:numalab/numalab_sel', 'scx_select_cpu_dfl', 'pid=+8(%di):s32', 'prev=%si:s32']
    >>> len(lines)
    10
    """
    o = offsets
    if o.get("SCX_IDLE_CPUS_SMT") != 8:
        raise LabError("struct scx_idle_cpus is not two pointers (CPUMASK_OFFSTACK off?)")
    masks = " ".join(_mask_args(nnodes))
    return [
        f"p:numalab/numalab_sel scx_select_cpu_dfl pid=+{o['TASK_PID']}(%di):s32 prev=%si:s32 "
        f"wf=%dx:x64 flags=%r8:x64 nr=+{o['TASK_NR_CPUS_ALLOWED']}(%di):s32 "
        f"allowed=+0(%cx):x64 {masks}",
        "r:numalab/numalab_selr scx_select_cpu_dfl ret=$retval:s32",
        "p:numalab/numalab_tac scx_idle_test_and_clear_cpu cpu=%di:s32",
        "r:numalab/numalab_tacr scx_idle_test_and_clear_cpu ret=$retval:u8",
        "p:numalab/numalab_pin pick_idle_cpu_in_node allowed=+0(%di):x64 node=%si:s32 "
        "flags=%dx:x64",
        "r:numalab/numalab_pinr pick_idle_cpu_in_node ret=$retval:s32",
        "p:numalab/numalab_pon pick_idle_cpu_from_online_nodes node=%si:s32 flags=%dx:x64",
        "r:numalab/numalab_ponr pick_idle_cpu_from_online_nodes ret=$retval:s32",
        f"p:numalab/numalab_upd __scx_update_idle cpu=+{o['RQ_CPU']}(%di):s32 idle=%si:u8 "
        f"notify=%dx:u8 cpid=+{o['TASK_PID']}(+{o['RQ_CURR']}(%di)):s32 "
        f"cflags=+{o['TASK_FLAGS']}(+{o['RQ_CURR']}(%di)):x32",
        f"r:numalab/numalab_updr __scx_update_idle {masks}",
    ]


PROBED_FUNCTIONS = ("scx_select_cpu_dfl", "scx_idle_test_and_clear_cpu",
                    "pick_idle_cpu_in_node", "pick_idle_cpu_from_online_nodes",
                    "__scx_update_idle", "update_builtin_idle", "scx_pick_idle_cpu",
                    "scx_bpf_select_cpu_dfl", "select_cpu_from_kfunc", "select_task_rq_scx",
                    "distribute_cpu_mask_prev", "runqueues", "__per_cpu_offset", "scx_idle_global_masks",
                    "scx_idle_node_masks")

_SECTION = r'''
# ---- sched_ext (numalab.lab.scx) ----
SCX_MODE=@SCX_MODE@
SCX_FLAGS="@SCX_FLAGS@"
SCX_BUF=@SCX_BUF@
RQ_DSQ_NR=@RQ_DSQ_NR@
if [ -n "$SCX_MODE" ]; then
  say "sched_ext: $SCX_MODE, loading scx_simple $SCX_FLAGS"
  grep -E ' (@KALLSYMS@)(\.[a-z]+\.[0-9]+)?$' /proc/kallsyms > $L/scx-kallsyms
  for s in scx_idle_global_masks scx_idle_node_masks runqueues __per_cpu_offset; do
    grep -q " $s\$" $L/scx-kallsyms || fail "sched_ext: $s not in /proc/kallsyms (CONFIG_KALLSYMS_ALL?)"
  done
  RQ=$(grep ' runqueues$' $L/scx-kallsyms | cut -d' ' -f1)
  DP=$(grep ' distribute_cpu_mask_prev$' $L/scx-kallsyms | cut -d' ' -f1)
  DSQ=""
  c=0
  for d in /sys/devices/system/cpu/cpu[0-9]*; do
    o=$(scxload offarg $RQ $RQ_DSQ_NR)
    DSQ="$DSQ dsq$c=$o(@__per_cpu_offset+$((8*c))):u32"
    c=$((c+1))
  done
  c=0
  for d in /sys/devices/system/cpu/cpu[0-9]*; do
    [ -n "$DP" ] || break
    o=$(scxload offarg $DP 0)
    DSQ="$DSQ dprev$c=$o(@__per_cpu_offset+$((8*c))):s32"
    c=$((c+1))
  done
  echo 0 > $T/tracing_on
  [ -r $T/trace ] && cat $T/trace > $L/trace
  [ -r $T/set_ftrace_filter ] && cat $T/set_ftrace_filter > $L/set_ftrace_filter
  echo nop > $T/current_tracer
  echo > $T/set_ftrace_filter
  echo > $T/trace
  echo counter > $T/trace_clock
  echo $SCX_BUF > $T/buffer_size_kb
  echo "$(head -n 1 /scx/probes)$DSQ" > /tmp/probes
  tail -n +2 /scx/probes >> /tmp/probes
  while read -r line; do
    echo "$line" >> $T/kprobe_events 2>/dev/null || echo "FAILED: $line" >> $L/scx-probe-errors
  done < /tmp/probes
  cat $T/kprobe_events > $L/scx-kprobe-events
  cat $T/error_log > $L/scx-error-log 2>/dev/null
  [ -d $T/events/numalab/numalab_sel ] || fail "sched_ext: the numalab_sel kprobe was refused ($(tail -n 2 $T/error_log 2>/dev/null | tr '\n' ' '))"
  scx_simple $SCX_FLAGS > $L/scx-simple.log 2>&1 &
  SPID=$!
  i=0
  while [ "$(cat /sys/kernel/sched_ext/state 2>/dev/null)" != enabled ]; do
    i=$((i+1))
    [ $i -gt 1500 ] && fail "sched_ext: scx_simple not enabled after 300 s ($(tail -n 3 $L/scx-simple.log | tr '\n' ' '))"
    kill -0 $SPID 2>/dev/null || fail "sched_ext: scx_simple exited ($(tail -n 3 $L/scx-simple.log | tr '\n' ' '))"
    sleep 0.2
  done
  cat /sys/kernel/sched_ext/root/ops > $L/scx-ops 2>/dev/null
  cat /sys/kernel/sched_ext/root/events > $L/scx-events.before 2>/dev/null
  say "sched_ext: $(cat $L/scx-ops) enabled uptime=$(now)"
  echo 1 > $T/events/numalab/enable
  for e in @TRACEPOINTS@; do echo 1 > $T/events/sched/$e/enable; done
  echo > $T/trace
  echo 1 > $T/tracing_on
  while read -r label args; do
    echo "numalab: begin $label" > $T/trace_marker
    scxload $args || fail "sched_ext: workload $label failed"
    echo "numalab: end $label" > $T/trace_marker
    say "sched_ext: $label done uptime=$(now)"
  done < /scx/workloads
  echo 0 > $T/tracing_on
  cat /sys/kernel/sched_ext/root/events > $L/scx-events.after 2>/dev/null
  for d in $T/per_cpu/cpu*; do echo "${d##*/} $(tr '\n' ' ' < $d/stats)"; done > $L/scx-buffer
  cat $T/trace > $L/scx-trace
  echo > $T/trace
  echo 0 > $T/events/enable
  kill -INT $SPID
  i=0
  while kill -0 $SPID 2>/dev/null && [ $i -lt 300 ]; do i=$((i+1)); sleep 0.2; done
  cat /sys/kernel/sched_ext/state > $L/scx-state.after 2>/dev/null
  say "sched_ext: trace saved ($(wc -l < $L/scx-trace) lines), scheduler $(cat $L/scx-state.after)"
fi
'''


def init_section(mode: str, offsets: dict[str, int], buffer_kb: int = 2048) -> str:
    """The shell text ``/init`` runs for a sched_ext run (``""`` without one).
    It reads ``/scx/probes`` (:func:`probe_lines`) and ``/scx/workloads``
    (one ``LABEL ARGS...`` line each) from the initramfs."""
    if not mode:
        return ""
    if mode not in MODES:
        raise LabError(f"--sched-ext {mode!r}: flat or pernode")
    out = _SECTION
    for key, value in {"SCX_MODE": mode, "SCX_FLAGS": "-n" if mode == "pernode" else "",
                       "SCX_BUF": str(int(buffer_kb)),
                       "RQ_DSQ_NR": str(int(offsets["RQ_SCX_LOCAL_DSQ_NR"])),
                       "KALLSYMS": "|".join(PROBED_FUNCTIONS),
                       "TRACEPOINTS": " ".join(TRACEPOINTS)}.items():
        out = out.replace(f"@{key}@", value)
    return out


# -- the reader ---------------------------------------------------------------------------

@dataclass
class Select:
    """One ``scx_select_cpu_dfl()`` call (see the module doc)."""

    seq: int
    waker_cpu: int
    waker_pid: int
    pid: int
    prev_cpu: int
    wake_flags: int
    flags: int
    nr_cpus_allowed: int
    allowed: int
    masks: dict[int, tuple[int, int]]
    dsq_nr: list[int]
    dprev: list[int] = field(default_factory=list)
    claims: list[tuple[int, bool, str]] = field(default_factory=list)
    claim_seq: list[int] = field(default_factory=list)      # counter of each claim's return
    searches: list[tuple[int, int, int, int]] = field(default_factory=list)
    walked: bool = False
    ret: int | None = None
    end_seq: int | None = None
    workload: str | None = None
    landed: int | None = None
    ran_on: int | None = None
    waker_exiting: bool = False
    concurrent_stores: int = 0     # storing updates on other CPUs between entry and return


@dataclass
class Update:
    """One ``__scx_update_idle()`` call: ``writes`` says whether it stores to
    the masks (``notify`` or the idle task was current: the idle->idle
    refresh)."""

    seq: int
    cpu: int
    idle: bool
    notify: bool
    curr_pid: int
    curr_flags: int
    masks_after: dict[int, tuple[int, int]] | None = None
    workload: str | None = None
    site: str = ""                 # the caller: put_prev_task_idle, set_next_task_idle, pick_task_idle
    end_seq: int | None = None     # counter of the return (masks_after were read then)

    @property
    def curr_is_idle(self) -> bool:
        return bool(self.curr_flags & PF_IDLE)

    @property
    def writes(self) -> bool:
        return self.notify or self.curr_is_idle


@dataclass
class Workload:
    name: str
    begin: int
    end: int | None = None


@dataclass
class ScxRun:
    """A parsed sched_ext trace: ``mode``, the CPUs' nodes and cores (from the
    dump's topology when read with :func:`read_scx`), the workloads, the
    select calls and idle updates in counter order."""

    mode: str
    nnodes: int
    workloads: list[Workload]
    selects: list[Select]
    updates: list[Update]
    other_claims: int = 0          # claims outside scx_select_cpu_dfl (kfuncs)
    lines: int = 0
    cpu_node: list[int] = field(default_factory=list)
    cpu_core: list[int] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    release: str = ""

    def in_workload(self, name: str | None):
        """``(selects, updates)`` of one workload (``None``: all)."""
        if name is None:
            return self.selects, self.updates
        return ([s for s in self.selects if s.workload == name],
                [u for u in self.updates if u.workload == name])

    def counts(self, workload: str | None = None) -> dict:
        """Counts per site for one workload (or all): select calls and their
        outcomes, claim attempts (idle ``cpu``-mask read-modify-writes at
        ``scx_idle_test_and_clear_cpu``), searches and node walks, updates
        that store (transitions, idle->idle refreshes) and those that do not,
        picks landing on another node than ``prev_cpu``'s or the waker's.
        ``claims_at_SITE`` counts the claim attempts of one source step
        (:func:`claim_site_name`), ``claims_won_at_SITE`` those that won."""
        sel, upd = self.in_workload(workload)
        c: Counter = Counter()
        c["select_calls"] = len(sel)
        for s in sel:
            c["select_idle_picks" if s.ret is not None and s.ret >= 0 else "select_busy"] += 1
            c["claims"] += len(s.claims)
            c["claims_won"] += sum(ok for _, ok, _ in s.claims)
            for _, ok, site in s.claims:
                c[f"claims_at_{claim_site_name(self.release, site)}"] += 1
                c[f"claims_won_at_{claim_site_name(self.release, site)}"] += ok
            c["node_searches"] += len(s.searches)
            c["node_walks"] += s.walked
            c["sync_wakeups"] += bool(s.wake_flags & WF_SYNC)
            c["fork_wakeups"] += bool(s.wake_flags & WF_FORK)
            if self.cpu_node and s.ret is not None and s.ret >= 0:
                c["picks_off_prev_node"] += self.cpu_node[s.ret] != self.cpu_node[s.prev_cpu]
                c["picks_off_waker_node"] += self.cpu_node[s.ret] != self.cpu_node[s.waker_cpu]
            if self.cpu_node and s.ran_on is not None:
                c["ran_off_prev_node"] += self.cpu_node[s.ran_on] != self.cpu_node[s.prev_cpu]
        for u in upd:
            if u.notify:
                c["update_to_idle" if u.idle else "update_to_busy"] += 1
            elif u.curr_is_idle:
                c["update_refresh"] += 1
            else:
                c["update_no_store"] += 1
        c["update_cpu_mask_stores"] = c["update_to_idle"] + c["update_to_busy"] + c["update_refresh"]
        return dict(sorted(c.items()))


# Where each scx_idle_test_and_clear_cpu() call returns to, in Debian's
# 7.2.13+deb14-amd64 (from objdump -d of its vmlinux at the addresses of its
# /proc/kallsyms; all five call sites of scx_select_cpu_dfl() and the one of
# pick_idle_cpu_in_node() are out-of-line calls, none is inlined):
CLAIM_SITES = {
    "7.2.13+deb14-amd64": {
        "scx_select_cpu_dfl+0x50e": "sync_prev",     # idle.c:534 WAKE_SYNC: prev_cpu shares the waker's LLC
        "scx_select_cpu_dfl+0x2ac": "sync_waker",    # idle.c:558 WAKE_SYNC: the waker's own CPU
        "scx_select_cpu_dfl+0x51f": "smt_prev",      # idle.c:574 SMT: prev_cpu's whole core idle
        "scx_select_cpu_dfl+0x4f7": "prev",          # idle.c:622 prev_cpu idle
        "scx_select_cpu_dfl+0x3f3": "sibling",       # idle.c:634 an SMT sibling of prev_cpu
        "pick_idle_cpu_in_node+0x83": "pick",        # idle.c:134 a search's claim
    },
}


def claim_site_name(release: str, site: str) -> str:
    """The source step of a claim's return site (``"pick"``, ``"sync_waker"``...),
    or the raw ``FUNC+0xOFF`` for a kernel this table does not know."""
    return CLAIM_SITES.get(release, {}).get(site, site)


_RETSITE = re.compile(r"\((?P<site>[\w.]+\+0x[0-9a-f]+)/0x[0-9a-f]+ <- [\w.]+\)")
_LINE = re.compile(r"^\s*(?P<comm>.*?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?"
                   r"(?P<ts>\d+(?:\.\d+)?):\s+(?P<event>[\w]+):\s?(?P<rest>.*)$")
_KV = re.compile(r"(\w+)=(\S+)")


def _num(v: str, where: str) -> int:
    try:
        return int(v, 0) if not re.fullmatch(r"-?0\d+", v) else int(v, 10)
    except ValueError:
        raise LabError(f"{where}: {v!r} is not a number") from None


def _masks(kv: dict[str, str], nnodes: int, where: str) -> dict[int, tuple[int, int]]:
    out = {-1: (_num(kv["gcpu"], where), _num(kv["gsmt"], where))}
    for n in range(nnodes):
        out[n] = (_num(kv[f"n{n}cpu"], where), _num(kv[f"n{n}smt"], where))
    return out


def parse_scx_trace(text: str, mode: str, nnodes: int, where: str = "scx-trace") -> ScxRun:
    """Parse the guest's ``scx-trace`` into an :class:`ScxRun`.

    Raises LabError (one line naming the line number) for a malformed
    numalab event, an unterminated select, or a trace without any event.
    """
    if mode not in MODES:
        raise LabError(f"{where}: mode {mode!r} is not flat or pernode")
    run = ScxRun(mode=mode, nnodes=nnodes, workloads=[], selects=[], updates=[])
    open_sel: dict[int, Select] = {}
    open_tac: dict[int, int] = {}
    open_pin: dict[int, tuple[int, int, int]] = {}
    open_upd: dict[int, Update] = {}
    pending_land: dict[int, Select] = {}     # pid -> select waiting for its sched_wakeup
    pending_run: dict[int, Select] = {}      # pid -> select waiting for its first run
    exiting: set[int] = set()
    current: Workload | None = None
    nev = 0
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            if "numalab_" in line:
                raise LabError(f"{where}:{lineno}: unreadable event line")
            continue
        nev += 1
        at = f"{where}:{lineno}"
        cpu, seq, ev, rest = int(m["cpu"]), int(float(m["ts"])), m["event"], m["rest"]
        kv = dict(_KV.findall(rest))
        wl = current.name if current and current.end is None else None
        try:
            if ev == "tracing_mark_write":
                mm = re.search(r"numalab: (begin|end) (\S+)", rest)
                if mm and mm[1] == "begin":
                    current = Workload(mm[2], seq)
                    run.workloads.append(current)
                elif mm and current and current.name == mm[2]:
                    current.end = seq
            elif ev == "numalab_sel":
                if cpu in open_sel:
                    raise LabError(f"{at}: select on CPU {cpu} before the previous one returned")
                ncpu = len([k for k in kv if re.fullmatch(r"dsq\d+", k)])
                open_sel[cpu] = Select(
                    seq=seq, waker_cpu=cpu, waker_pid=int(m["pid"]), pid=_num(kv["pid"], at),
                    prev_cpu=_num(kv["prev"], at), wake_flags=_num(kv["wf"], at),
                    flags=_num(kv["flags"], at), nr_cpus_allowed=_num(kv["nr"], at),
                    allowed=_num(kv["allowed"], at), masks=_masks(kv, nnodes, at),
                    dsq_nr=[_num(kv[f"dsq{c}"], at) for c in range(ncpu)],
                    dprev=[_num(kv[f"dprev{c}"], at) for c in range(ncpu) if f"dprev{c}" in kv],
                    workload=wl,
                    waker_exiting=int(m["pid"]) in exiting)
            elif ev == "numalab_selr":
                s = open_sel.pop(cpu, None)
                if s is not None:
                    s.ret, s.end_seq = _num(kv["ret"], at), seq
                    run.selects.append(s)
                    pending_land[s.pid] = s
                    pending_run[s.pid] = s
            elif ev == "numalab_tac":
                open_tac[cpu] = _num(kv["cpu"], at)
            elif ev == "numalab_tacr":
                c = open_tac.pop(cpu, None)
                if c is not None:
                    rs = _RETSITE.search(rest)
                    if cpu in open_sel:
                        open_sel[cpu].claims.append((c, bool(_num(kv["ret"], at)),
                                                     rs["site"] if rs else ""))
                        open_sel[cpu].claim_seq.append(seq)
                    else:
                        run.other_claims += 1
            elif ev == "numalab_pin":
                open_pin[cpu] = (_num(kv["node"], at), _num(kv["flags"], at),
                                 _num(kv["allowed"], at))
            elif ev == "numalab_pinr":
                p = open_pin.pop(cpu, None)
                if p is not None and cpu in open_sel:
                    open_sel[cpu].searches.append((*p, _num(kv["ret"], at)))
            elif ev == "numalab_pon":
                if cpu in open_sel:
                    open_sel[cpu].walked = True
            elif ev == "numalab_upd":
                open_upd[cpu] = Update(seq=seq, cpu=_num(kv["cpu"], at),
                                       idle=bool(_num(kv["idle"], at)),
                                       notify=bool(_num(kv["notify"], at)),
                                       curr_pid=_num(kv["cpid"], at),
                                       curr_flags=_num(kv["cflags"], at), workload=wl)
            elif ev == "numalab_updr":
                u = open_upd.pop(cpu, None)
                if u is not None:
                    u.masks_after = _masks(kv, nnodes, at)
                    u.end_seq = seq
                    rs = _RETSITE.search(rest)
                    u.site = rs["site"].split("+")[0] if rs else ""
                    run.updates.append(u)
            elif ev in ("sched_wakeup", "sched_wakeup_new"):
                s = pending_land.pop(_num(kv.get("pid", "-1"), at), None)
                if s is not None and "target_cpu" in kv:
                    s.landed = int(kv["target_cpu"], 10)
            elif ev == "sched_switch":
                s = pending_run.pop(_num(kv.get("next_pid", "-1"), at), None)
                if s is not None:
                    s.ran_on = cpu
            elif ev == "sched_process_exit":
                exiting.add(_num(kv.get("pid", "-1"), at))
        except KeyError as e:
            raise LabError(f"{at}: {ev} lacks field {e.args[0]}") from None
    if open_sel:
        cpu = next(iter(open_sel))
        raise LabError(f"{where}: a select on CPU {cpu} never returned (truncated trace?)")
    if not nev:
        raise LabError(f"{where}: no trace events")
    run.lines = nev
    _mark_concurrent(run)
    return run


def _mark_concurrent(run: ScxRun) -> None:
    """``Select.concurrent_stores``: the storing updates and the claims made
    by other CPUs between a select's entry and return (the masks it read at
    entry may then be stale)."""
    import bisect
    stores = sorted([(u.seq, u.cpu) for u in run.updates if u.writes]
                    + [(q, s.waker_cpu) for s in run.selects for q in s.claim_seq])
    seqs = [q for q, _ in stores]
    for s in run.selects:
        if s.end_seq is None:
            continue
        lo, hi = bisect.bisect_right(seqs, s.seq), bisect.bisect_left(seqs, s.end_seq)
        s.concurrent_stores = sum(1 for _, cpu in stores[lo:hi] if cpu != s.waker_cpu)


def read_scx(path) -> ScxRun:
    """Read the sched_ext record of a lab dump (``.tar.bz2``): the trace, its
    ``scx.json`` and the dump's topology (each CPU's node and core).

    Raises LabError (one line) for a dump without a sched_ext record or a
    malformed one; TopologyError for an unreadable archive.
    """
    from ..topology import load
    from ..topology.safetar import read_archive
    tree = read_archive(path)
    tops = sorted(tree.children.get("", ()))
    if len(tops) != 1:
        raise LabError(f"{path}: expected one top folder, found {tops}")
    base = f"{tops[0]}/numalab/lab"
    raw = tree.read(f"{base}/scx.json")
    if raw is None:
        raise LabError(f"{path}: no sched_ext record (numalab/lab/scx.json); "
                       "made without --sched-ext?")
    try:
        meta = json.loads(raw)
    except ValueError as e:
        raise LabError(f"{path}: scx.json is not JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise LabError(f"{path}: scx.json is not {FORMAT}")
    trace = tree.read(f"{base}/scx-trace")
    if trace is None:
        raise LabError(f"{path}: scx.json without numalab/lab/scx-trace")
    nnodes = meta.get("nnodes")
    if not isinstance(nnodes, int) or nnodes < 1:
        raise LabError(f"{path}: scx.json: nnodes must be a positive integer")
    run = parse_scx_trace(trace.decode("utf-8", "replace"), meta.get("mode"), nnodes,
                          where=f"{path}: scx-trace")
    run.meta = meta
    rel = tree.read(f"{base}/uname-r")
    run.release = rel.decode().strip() if rel else ""
    topo = load(path)
    ncpu = max(topo.cpus) + 1
    run.cpu_node = [topo.cpus[c].node if c in topo.cpus else -1 for c in range(ncpu)]
    run.cpu_core = [((topo.cpus[c].thread_siblings & -topo.cpus[c].thread_siblings).bit_length() - 1)
                    if c in topo.cpus else -1 for c in range(ncpu)]
    return run


# -- the port on the recorded state -----------------------------------------------------------

@dataclass
class PortPick:
    """What the port's ``scx_select_cpu_dfl()`` does from one recorded
    select's entry state: its return value and claim attempts
    ``[(cpu, claimed)]``, beside the kernel's."""

    select: Select
    ret: int
    claims: list[tuple[int, bool]]

    @property
    def kernel_claims(self) -> list[tuple[int, bool]]:
        return [(c, ok) for c, ok, _ in self.select.claims]

    @property
    def same_ret(self) -> bool:
        return self.ret == self.select.ret

    @property
    def same_claims(self) -> bool:
        return self.claims == self.kernel_claims


def port_masks(run: ScxRun, topo):
    """An :class:`numalab.kernel.sched.ext_idle.IdleMasks` for the run's
    machine and mode (the port's state object, reused by :func:`port_pick`)."""
    from ..kernel.sched.ext_idle import IdleMasks
    return IdleMasks(topo, per_node=run.mode == "pernode")


def port_pick(m, s: Select) -> PortPick:
    """Run the port's ``scx_select_cpu_dfl()`` on the state ``s`` recorded at
    the kernel's entry: the idle masks, every CPU's local DSQ length, every
    CPU's ``distribute_cpu_mask_prev`` (when recorded), the waker's CPU as
    ``this_cpu``, the waker's ``PF_EXITING`` (``Select.waker_exiting``, which
    7.2's WAKE_SYNC branch tests, idle.c:553), the task's allowed CPUs,
    ``wake_flags`` and ``flags``.
    The port's claims are observed the way the kprobe observes the kernel's:
    each call of its ``scx_idle_test_and_clear_cpu()`` and its result.
    ``m``: from :func:`port_masks` (its masks and ``waker_exiting`` are
    overwritten here)."""
    from ..kernel.sched import ext_idle as port
    for node, (cpu_bits, smt_bits) in s.masks.items():
        pair = m.global_masks if node == -1 else m.node_masks.get(node)
        if pair is not None:
            pair.cpu.bits, pair.smt.bits = cpu_bits & m.possible, smt_bits & m.possible
    for c in range(min(len(s.dsq_nr), m.nr_cpu_ids)):
        m.local_dsq_nr[c] = s.dsq_nr[c]
    for c in range(min(len(s.dprev), m.nr_cpu_ids)):
        m.distribute_prev[c] = s.dprev[c]
    m.this_cpu = s.waker_cpu
    m.waker_exiting = bool(s.waker_exiting)
    claims: list[tuple[int, bool]] = []
    real = port.scx_idle_test_and_clear_cpu

    def observed(mm, cpu):
        ok = real(mm, cpu)
        claims.append((cpu, bool(ok)))
        return ok

    port.scx_idle_test_and_clear_cpu = observed
    try:
        ret = port.scx_select_cpu_dfl(m, s.prev_cpu, s.wake_flags, s.allowed, s.flags)
    finally:
        port.scx_idle_test_and_clear_cpu = real
    return PortPick(select=s, ret=ret, claims=claims)


def update_checks(run: ScxRun):
    """Pairs ``(before, update)`` for the updates whose masks just before
    are known: the last snapshot (a select's entry masks or an update's
    masks after) precedes the update, and between that snapshot and the
    update's return (when its ``masks_after`` were read) nobody else claimed
    or stored. ``before``: ``{node: (cpu, smt)}``."""
    snaps = sorted([(s.seq, s.masks) for s in run.selects]
                   + [(u.end_seq, u.masks_after) for u in run.updates if u.masks_after])
    events = sorted([u.seq for u in run.updates if u.writes]
                    + [q for s in run.selects for q in s.claim_seq])
    import bisect
    sseq = [q for q, _ in snaps]
    out = []
    for u in run.updates:
        if u.masks_after is None:
            continue
        i = bisect.bisect_left(sseq, u.seq) - 1
        if i < 0:
            continue
        at, before = snaps[i]
        # no store but this update's own between the snapshot and its return
        if bisect.bisect_left(events, u.end_seq) - bisect.bisect_left(events, at) > u.writes:
            continue
        out.append((before, u))
    return out


def port_update(m, before: dict[int, tuple[int, int]], u: Update) -> dict[int, tuple[int, int]]:
    """The masks after the port's ``__scx_update_idle()`` for ``u``, started
    from ``before`` (only the pairs the run's mode uses are returned)."""
    from ..kernel.sched import ext_idle as port
    for node, (cpu_bits, smt_bits) in before.items():
        pair = m.global_masks if node == -1 else m.node_masks.get(node)
        if pair is not None:
            pair.cpu.bits, pair.smt.bits = cpu_bits & m.possible, smt_bits & m.possible
    m.this_cpu = u.cpu
    port.__scx_update_idle(m, u.cpu, u.idle, u.notify, u.curr_is_idle)
    pairs = {-1: m.global_masks} if not m.per_node else dict(m.node_masks)
    return {n: (p.cpu.bits, p.smt.bits) for n, p in pairs.items()}


# -- the committed runs and their repeats ------------------------------------------------------

_RUN = re.compile(r"^lab-[\w.]+-scx-(flat|pernode)-(.+?)(?:-run(\d+))?\.tar\.bz2$")


def dump_name(path) -> tuple[str, str, int]:
    """``(machine, mode, run)`` of a committed sched_ext dump's file name:
    ``lab-7.2-scx-MODE-MACHINE.tar.bz2`` is run 1, ``...-MACHINE-runN.tar.bz2``
    run N (data/lab/scx/repeats/). Raises LabError for any other name.

    >>> dump_name("data/lab/scx/lab-7.2-scx-pernode-12cpu-4n-uneven.tar.bz2")
    ('12cpu-4n-uneven', 'pernode', 1)
    >>> dump_name("lab-7.2-scx-flat-16cpu-2n-run3.tar.bz2")
    ('16cpu-2n', 'flat', 3)
    """
    name = str(path).rsplit("/", 1)[-1]
    m = _RUN.match(name)
    if not m:
        raise LabError(f"{name}: not a sched_ext dump name (lab-K-scx-MODE-MACHINE[-runN].tar.bz2)")
    return m.group(2), m.group(1), int(m.group(3) or 1)


def scx_dumps(scx_dir) -> list:
    """The committed sched_ext dumps under ``scx_dir`` (``*.tar.bz2``: run 1 of
    each machine and mode; ``repeats/*.tar.bz2``: later runs, same commands),
    sorted by machine, mode and run."""
    from pathlib import Path
    d = Path(scx_dir)
    paths = list(d.glob("lab-*-scx-*.tar.bz2")) + list((d / "repeats").glob("lab-*-scx-*.tar.bz2"))
    return sorted(paths, key=dump_name)


WON_NO_WAKER = "claims that won a CPU, waker's own CPU left out %"


def run_row(path, run: ScxRun) -> dict:
    """One committed run's headline counts: machine, masks, run, wakeups,
    claims per wakeup, the share of claims that won a CPU (%), the same share
    without the ``SCX_WAKE_SYNC`` branch's claims of the waker's own CPU
    (:data:`WON_NO_WAKER`; 7.2 returns that CPU whether or not its claim won,
    and it is running the waker), those claims and how many of them won,
    idle-mask stores at idle transitions per wakeup, node walks, picks off
    ``prev_cpu``'s node (% of idle picks)."""
    machine, mode, k = dump_name(path)
    c, n = run.counts(), len(run.selects)
    sw, sw_won = c.get("claims_at_sync_waker", 0), c.get("claims_won_at_sync_waker", 0)
    return {"machine": machine, "masks": mode, "run": k, "wakeups": n,
            "claims per wakeup": c["claims"] / max(n, 1),
            "claims that won a CPU %": 100 * c["claims_won"] / max(c["claims"], 1),
            WON_NO_WAKER: 100 * (c["claims_won"] - sw_won) / max(c["claims"] - sw, 1),
            "claims of the waker's CPU (sync)": sw, "claims of the waker's CPU that won": sw_won,
            "mask stores at idle transitions per wakeup": c["update_cpu_mask_stores"] / max(n, 1),
            "node walks": c.get("node_walks", 0),
            "picks off prev_cpu's node %": 100 * c.get("picks_off_prev_node", 0)
            / max(c.get("select_idle_picks", 0), 1)}


def compare_ranges(flat: list[float], pernode: list[float]) -> str:
    """How per-node runs' values stand against flat runs' values:
    ``"overlap"`` when the ranges share a point, ``"higher"``/``"lower"`` when
    every per-node run is above/below every flat run, ``"one run"`` when either
    mode has a single run (one run each cannot rank the modes).

    >>> compare_ranges([31, 34, 46], [42, 50, 59])
    'overlap'
    >>> compare_ranges([30, 32], [40, 41])
    'higher'
    >>> compare_ranges([53], [29])
    'one run'
    """
    if len(flat) < 2 or len(pernode) < 2:
        return "one run"
    if max(min(flat), min(pernode)) <= min(max(flat), max(pernode)):
        return "overlap"
    return "higher" if min(pernode) > max(flat) else "lower"
