"""``drivers/base/dd.c``: which probes the driver core makes asynchronous,
and which synchronous probes the v2 series sends to the device's node.

``driver_allows_async_probing()``: ``PROBE_PREFER_ASYNCHRONOUS`` -> yes;
``PROBE_FORCE_SYNCHRONOUS`` -> no; otherwise yes when the driver is named in
``driver_async_probe=`` (``*`` means every driver, and then a named driver
is the exception), or its module was loaded with ``async_probe``.

An asynchronous probe is scheduled with ``async_schedule_dev()``, i.e.
``queue_work_node(dev_to_node(dev), async_wq, ...)`` on the *unbound*
``async_wq``; ``__driver_attach_async_helper()`` then takes ``device_lock``
in that worker and calls ``driver_probe_device()`` there.

The v2 series adds ``__driver_probe_device_node()``: a synchronous probe of
a device with a valid, online node is queued with ``queue_work_node(node,
system_dfl_wq, ...)`` and the caller waits for it (``flush_work()``), while
the caller keeps holding ``device_lock``. Asynchronous probes are already on
the node and are not redirected. The bus opt-in variant asked for in review
restricts the redirection to buses that set a flag (PCI).
"""

from __future__ import annotations

__all__ = ["NEED_PARENT_LOCK_BUSES", "PROBE_DEFAULT_STRATEGY", "PROBE_PREFER_ASYNCHRONOUS", "PROBE_FORCE_SYNCHRONOUS",
           "parse_option_str", "cmdline_requested_async_probing", "driver_allows_async_probing",
           "probe_redirected_to_node"]

# Buses whose bus_type sets .need_parent_lock (Linux 7.2: usb_bus_type in
# drivers/usb/core/driver.c): __driver_attach() and __device_attach() then also
# take the parent's device_lock (__device_driver_lock()) in the caller.
NEED_PARENT_LOCK_BUSES = frozenset({"usb"})

PROBE_DEFAULT_STRATEGY = "default"
PROBE_PREFER_ASYNCHRONOUS = "async"
PROBE_FORCE_SYNCHRONOUS = "sync"


def parse_option_str(option_list: str, name: str) -> bool:
    """``parse_option_str()``: is ``name`` one of the comma-separated entries?

    >>> parse_option_str("nvme,ahci", "ahci"), parse_option_str("nvme", "nv")
    (True, False)
    """
    return name in option_list.split(",") if option_list else False


def cmdline_requested_async_probing(drv_name: str, driver_async_probe: str = "") -> bool:
    """``cmdline_requested_async_probing()`` for ``driver_async_probe=LIST``.

    ``async_probe_default`` is "the list contains ``*``"; a driver is
    asynchronous when its being listed differs from that default.

    >>> cmdline_requested_async_probing("usb", "*,usb"), cmdline_requested_async_probing("nvme", "*")
    (False, True)
    """
    async_probe_default = parse_option_str(driver_async_probe, "*")
    return async_probe_default != parse_option_str(driver_async_probe, drv_name)


def driver_allows_async_probing(probe_type: str, drv_name: str, driver_async_probe: str = "",
                                module_async_probe: bool = False) -> bool:
    """``driver_allows_async_probing()``.

    >>> driver_allows_async_probing("async", "nvme"), driver_allows_async_probing("default", "mlx5_core")
    (True, False)
    >>> driver_allows_async_probing("default", "mlx5_core", "mlx5_core")
    True
    """
    if probe_type == PROBE_PREFER_ASYNCHRONOUS:
        return True
    if probe_type == PROBE_FORCE_SYNCHRONOUS:
        return False
    if cmdline_requested_async_probing(drv_name, driver_async_probe):
        return True
    return bool(module_async_probe)


def probe_redirected_to_node(node: int, node_online: bool, async_probe: bool,
                             bus_opted_in: bool = True) -> bool:
    """Does ``__driver_probe_device_node()`` queue this probe on the node?

    Only synchronous probes of devices with a valid, online node; with the
    bus opt-in variant, only on buses that opted in.

    >>> probe_redirected_to_node(0, True, False), probe_redirected_to_node(0, True, True)
    (True, False)
    >>> probe_redirected_to_node(-1, False, False), probe_redirected_to_node(0, True, False, False)
    (False, False)
    """
    return bool(bus_opted_in and not async_probe and node >= 0 and node_online)
