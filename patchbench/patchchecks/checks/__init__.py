"""The netdev per-patch checks, one module each: ID, MESSAGE, NEEDS, run(context) (see patchbench.patchchecks)."""
