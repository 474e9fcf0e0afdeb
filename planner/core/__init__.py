"""The ground layer: what every other part of the planner stands on, and imports nothing above it.

The request and plan models and their parsing (``models``, ``io``, ``csvio``), the error tree
(``errors``), device targets and element types (``targets``, ``dtypes``), the interference graph
and its bounds (``graph``), thread-access and pattern analysis (``access``, ``patterns``,
``aliasing``), the barrier hazards of a placement (``barriers``), which optional parts are
installed (``install``) and the compiled-kernel helper (``_jit``).
"""
