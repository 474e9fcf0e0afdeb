"""Bridges to compilers' own IR: read a kernel's shared-memory buffers from MLIR (the ``gpu``
dialect, IREE's executables) or from Triton's TTGIR, plan them, and rewrite the IR or judge
the compiler's own plan (docs/bridges.md).

Each bridge needs its extra (``mlir``: iree-base-compiler; ``triton``: triton) and raises
``MissingExtraError`` naming it when the package is missing; nothing here is imported by the
planner itself.
"""
