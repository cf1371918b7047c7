"""W3: NMS on 1k / 5k / 20k / 100k boxes (random centers in 1000 x 1000, sides 10-110),
IoU 0.5, next to torchvision.ops.nms; per class over 80 classes next to
torchvision.ops.batched_nms; the sync-free form under CUDA-graph capture; a batch of 8
images x 80 classes through multiclass_nms."""
from __future__ import annotations

SIZES = (1000, 5000, 20000, 100000)
CLASSES = 80
SETS = 4


def make_boxes(n, seed):
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    centers = torch.rand((n, 2), generator=g, device="cuda") * 1000
    sides = torch.rand((n, 2), generator=g, device="cuda") * 100 + 10
    boxes = torch.cat([centers - sides / 2, centers + sides / 2], dim=1)
    scores = torch.rand((n,), generator=g, device="cuda")
    classes = torch.randint(0, CLASSES, (n,), generator=g, device="cuda")
    return boxes, scores, classes


def run(bench):
    import torch
    import torchvision

    import cupyprep

    for n in SIZES:
        sets = [make_boxes(n, s) for s in range(SETS)]
        tag = f"W3 {n // 1000}k"
        # the whole call, eagerly: sort, mask, greedy pass and the final 8-byte count read
        bench.record(tag, "cupyprep nms (incl. count read)",
                     lambda i: cupyprep.nms(sets[i][0], sets[i][1], 0.5), SETS, 0, capture=False)
        bench.record(tag, "cupyprep nms, sync-free (return_count)",
                     lambda i: cupyprep.nms(sets[i][0], sets[i][1], 0.5, return_count=True), SETS, 0)
        bench.record(tag, "torchvision nms", lambda i: torchvision.ops.nms(sets[i][0], sets[i][1], 0.5),
                     SETS, 0, baseline=True, capture=False)
        tagc = f"W3 {n // 1000}k x{CLASSES}cls"
        bench.record(tagc, "cupyprep batched_nms (incl. count read)",
                     lambda i: cupyprep.batched_nms(sets[i][0], sets[i][1], sets[i][2], 0.5), SETS, 0,
                     capture=False)
        bench.record(tagc, "cupyprep batched_nms, sync-free",
                     lambda i: cupyprep.batched_nms(sets[i][0], sets[i][1], sets[i][2], 0.5,
                                                    return_count=True), SETS, 0)
        bench.record(tagc, "torchvision batched_nms",
                     lambda i: torchvision.ops.batched_nms(sets[i][0], sets[i][1], sets[i][2], 0.5),
                     SETS, 0, baseline=True, capture=False)
        del sets
        torch.cuda.empty_cache()

    # a detector's batch: 8 images x 8400 boxes x 80 classes, threshold 0.25, top 1000, 100 out
    g = torch.Generator(device="cuda").manual_seed(0)
    B, N = 8, 8400
    boxes = torch.stack([make_boxes(N, 100 + b)[0] for b in range(B)])
    scores = torch.rand((B, N, CLASSES), generator=g, device="cuda") ** 8  # few above 0.25

    def ours(i):
        cupyprep.multiclass_nms(boxes, scores, iou_threshold=0.5, score_threshold=0.25, top_k=1000,
                                max_detections=100)

    def torchvision_loop(i):
        for b in range(B):
            s, cls = scores[b].reshape(-1), torch.arange(CLASSES, device="cuda").repeat(N)
            keep = s > 0.25
            s, cls = s[keep], cls[keep]
            box = boxes[b].repeat_interleave(CLASSES, dim=0)[keep]
            top = s.topk(min(1000, s.numel())).indices
            torchvision.ops.batched_nms(box[top], s[top], cls[top], 0.5)[:100]

    bench.record("W3 8x8400x80", "cupyprep multiclass_nms (1 call, sync-free)", ours, 1, 0)
    bench.record("W3 8x8400x80", "torchvision per image: filter + topk + batched_nms", torchvision_loop, 1, 0,
                 baseline=True, capture=False)
