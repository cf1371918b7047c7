"""W5: warp_affine of 64 images 512x512x3 uint8, a different rotation each, bilinear,
constant border; next to torch's affine_grid + grid_sample and cv2.warpAffine on the CPU
(a thread pool over the 64 images). W5r: the same work given as a list of 64 images of
mixed sizes around 512 x 512."""
from __future__ import annotations

N, H, W, C = 64, 512, 512, 3


def run(bench):
    import os
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    import torch
    import torch.nn.functional as F

    import cupyprep

    cv2 = __import__("cv2")
    inputs = bench.rotating_inputs(lambda: torch.randint(0, 256, (N, H, W, C), dtype=torch.uint8, device="cuda"))
    angles = np.linspace(-170, 170, N)
    mats = cupyprep.get_rotation_matrix_2d(np.tile([(W - 1) / 2, (H - 1) / 2], (N, 1)), angles, np.full(N, 0.9))
    inverse = torch.from_numpy(cupyprep.invert_affine_transform(mats)).cuda()  # dst -> src, on device
    out = torch.empty((N, H, W, C), dtype=torch.uint8, device="cuda")

    def ours(i):
        cupyprep.warp_affine(inputs[i], inverse, (H, W), inverse_map=True, out=out)

    # affine_grid works in normalized coordinates ([-1, 1], align_corners=False): conjugate
    # the pixel-space inverse by the pixel <-> normalized maps
    to_norm = np.array([[2 / W, 0, 1 / W - 1], [0, 2 / H, 1 / H - 1], [0, 0, 1]])
    inv3 = np.concatenate([cupyprep.invert_affine_transform(mats), np.tile([[[0, 0, 1]]], (N, 1, 1))], axis=1)
    theta = to_norm @ inv3 @ np.linalg.inv(to_norm)
    theta = torch.from_numpy(theta[:, :2]).float().cuda()
    grid = F.affine_grid(theta, (N, C, H, W), align_corners=False)

    def torch_method(i):
        x = inputs[i].permute(0, 3, 1, 2).float()
        y = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        return y.round_().clamp_(0, 255).to(torch.uint8).permute(0, 2, 3, 1)

    floor_bytes = 2 * N * H * W * C  # each input byte read once, each output byte written once
    bench.record("W5", "cupyprep warp_affine (1 launch)", ours, len(inputs), floor_bytes)
    bench.record("W5", "torch affine_grid + grid_sample (float)", torch_method, len(inputs), floor_bytes,
                 baseline=True)

    # a list of 64 images of mixed sizes (each its own allocation), one launch; up to 64
    # images go to the kernel by value, so the call is captured like a batch's
    rng = np.random.default_rng(0)
    shapes = [(int(h), int(w)) for h, w in zip(rng.integers(480, 545, N), rng.integers(480, 545, N))]
    ragged_sets = [[torch.randint(0, 256, s + (C,), dtype=torch.uint8, device="cuda") for s in shapes]
                   for _ in range(len(inputs))]

    def ours_ragged(i):
        cupyprep.warp_affine(ragged_sets[i], inverse, (H, W), inverse_map=True, out=out)

    floor_ragged = N * H * W * C + int(sum(h * w * C for h, w in shapes))
    bench.record("W5r", "cupyprep warp_affine, list of 64 images (1 launch)", ours_ragged,
                 len(ragged_sets), floor_ragged)
    ours_ragged(0)
    torch.cuda.synchronize()
    same_ragged = all(np.array_equal(
        out[n].cpu().numpy(),
        cv2.warpAffine(ragged_sets[0][n].cpu().numpy(), mats[n], (W, H), flags=cv2.INTER_LINEAR))
        for n in range(N))
    print(f"  W5r cupyprep == cv2.warpAffine for all {N} images: {same_ragged}")

    host = [inputs[0][n].cpu().numpy() for n in range(N)]
    host_out = [None] * N
    threads = os.cpu_count() or 1
    pool = ThreadPoolExecutor(threads)
    cv2.setNumThreads(1)

    def one(n):
        host_out[n] = cv2.warpAffine(host[n], mats[n], (W, H), flags=cv2.INTER_LINEAR)

    def cv2_method(i):
        list(pool.map(one, range(N)))

    bench.record("W5", f"cv2.warpAffine CPU, {threads}-thread pool", cv2_method, 1, floor_bytes, capture=False)
    # the kernel's uint8 output is cv2's, bit for bit
    ours(0)
    torch.cuda.synchronize()
    same = all(np.array_equal(out[n].cpu().numpy(), host_out[n]) for n in range(N))
    print(f"  W5 cupyprep == cv2.warpAffine for all {N} images: {same}")
