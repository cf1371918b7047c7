"""Side-by-side GPU timings of cupyprep against torch / torchvision / OpenCV.

Run as ``python -m benchmarks`` (see ``--help``). Times are CUDA-event medians of many
runs after warm-up, with inputs rotated so the L2 cache does not flatter; every table
prints the ratio to the best alternative and the memory-traffic floor.
"""
