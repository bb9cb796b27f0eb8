"""patchbench: read, apply, check, build and boot Linux kernel patch series."""

__version__ = "0.1.0"
