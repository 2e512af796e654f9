"""Ports of ``drivers/`` (the driver core and bus code), laid out like the kernel tree."""
