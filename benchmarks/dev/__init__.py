"""Development tools for the kernels, not workloads: ``python -m benchmarks.dev.<name>``.

- ``profile``: W1 / W2 / W1r through the fused preprocess kernel a few times (for ncu), or
  a sweep of its launch shape (``--sweep``).
- ``warp_types``: W5's rotations through every kind of warp (element type, channels,
  interpolation, border) against the memory-traffic floor.
- ``host_python``: preprocess's own Python per call (S1, S4), general path against launch
  plan, under the emulator with launches stubbed (no GPU needed).
- ``ptx_fingerprint``: every kernel variant's PTX entry hashed (NVRTC, no GPU), to check
  that a change of layout changes no kernel.
"""
