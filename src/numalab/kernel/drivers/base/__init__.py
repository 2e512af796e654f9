"""Ports of ``drivers/base/`` (the driver core)."""
