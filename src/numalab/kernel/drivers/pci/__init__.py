"""Ports of ``drivers/pci/``."""
