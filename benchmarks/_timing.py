"""CUDA-event timing and the memory-traffic floor."""
from __future__ import annotations

import statistics


def _events(run, n_inputs, repeat):
    import torch

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeat)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeat)]
    for i in range(repeat):
        starts[i].record()
        run(i % n_inputs)
        ends[i].record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    return {
        "median_ms": statistics.median(times),
        "p10_ms": times[len(times) // 10],
        "p90_ms": times[(len(times) * 9) // 10],
    }


def time_cuda(fn, n_inputs, warmup=10, repeat=100, capture=True, generators=()):
    """Milliseconds of ``fn(i)``, ``i`` cycling over ``n_inputs`` input sets.

    Two numbers: ``median_ms`` is device time, measured by replaying a CUDA graph of each
    call (so Python's launch overhead is not counted); ``eager_median_ms`` is the same call
    run eagerly, between the same events (device time plus any gaps the host leaves).
    ``capture=False`` times only eagerly: calls that read a value back to the host, or run
    on the CPU. ``generators``: torch generators the call draws from, registered with each
    graph (each replay then draws anew, as the eager calls do).
    """
    import torch

    for i in range(warmup):
        fn(i % n_inputs)
    torch.cuda.synchronize()
    eager = _events(fn, n_inputs, repeat)
    result = {}
    if not capture:
        result.update(eager)
        result["timing"] = "eager (not captured: a read-back or CPU work in the call)"
        result["eager_median_ms"] = eager["median_ms"]
        return result
    try:
        graphs = []
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for i in range(n_inputs):
                fn(i)  # warm the capture stream (allocations, caches)
        torch.cuda.current_stream().wait_stream(side)
        for i in range(n_inputs):
            g = torch.cuda.CUDAGraph()
            for gen in generators:
                g.register_generator_state(gen)
            with torch.cuda.graph(g):
                fn(i)
            graphs.append(g)
        for i in range(warmup):
            graphs[i % n_inputs].replay()
        result.update(_events(lambda i: graphs[i].replay(), n_inputs, repeat))
        result["timing"] = "graph replay"
    except Exception as exc:  # a path that cannot be captured is timed eagerly
        result.update(eager)
        result["timing"] = f"eager ({type(exc).__name__})"
    result["eager_median_ms"] = eager["median_ms"]
    return result


def copy_bandwidth(nbytes=2 << 30):
    """Device-to-device copy rate in bytes/s (bytes read plus bytes written)."""
    import torch

    a = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    return nbytes / (_events_once(lambda: b.copy_(a)) * 1e-3)


def _events_once(fn, repeat=20):
    import torch

    fn()
    torch.cuda.synchronize()
    return _events(lambda i: fn(), 1, repeat)["median_ms"]
