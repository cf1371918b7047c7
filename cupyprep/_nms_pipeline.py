"""The GPU NMS pipeline behind nms, batched_nms and multiclass_nms: score keys, a stable
sort (one block of nms.cu's own up to ``NmsSpec.small_sort`` keys of one segment, torch's
or CuPy's sort above), gathered boxes (for one small segment, keys, sort and gather are one
launch), the suppression mask of 64 x 64 tiles, and the greedy reduction on the GPU (one
warp per 64 boxes, chained in score order). The launches are planned once per geometry
(:mod:`cupyprep._nms_plan`)."""
from __future__ import annotations

import numpy as np

from . import _kernels, _transfers
from ._launch import launch_1d
from ._nms_plan import INPUTS, Layout, Plan
from ._specs import nms as nms_spec
from ._torch import from_torch

__all__ = ["plan_pipeline", "finish", "empty_result", "mask_bytes"]


# --- the GPU NMS pipeline ----------------------------------------------------------------------------
def _argsort(call, native, view):
    if call.kind == "torch":
        import torch

        order = torch.sort(native, stable=True).indices
        return from_torch(order)
    if call.kind == "cupy":
        return call.xp.argsort(view)  # thrust's stable sort
    return np.argsort(view, kind="stable")


def _sorted(call, native, view):
    """The values in ascending order (a device array of the caller's library)."""
    if call.kind == "torch":
        import torch

        return from_torch(torch.sort(native).values)
    return call.xp.sort(view)


def mask_bytes(B, K):
    """Bytes of the suppression mask for B segments of up to K candidates (the upper
    triangle of 64 x 64 blocks, one bit per pair)."""
    cb = (K + 63) // 64
    return B * 64 * (cb * (cb + 1) // 2) * 8


def plan_pipeline(call, boxes, b_strides, scores, s_strides, B, N, C, *, iou_threshold,
                  score_threshold, top_k, max_det, cls_mode, class_src=None, s_cls=0,
                  want_classes=False, grouped=False, too_large="", emit_per_box=None):
    """The launches keys -> argsort -> gather -> mask -> reduce for boxes, scores (and
    ``class_src``) of this geometry, as a :class:`~cupyprep._nms_plan.Plan` whose results
    are ``ids`` (B, max_det), ``classes`` (B, max_det) or None, ``counts`` (B,), and, for
    one segment, ``indices`` (max_det,) and ``count`` () (the same memory as ``ids[0]`` and
    ``counts[0]``). ``emit_per_box`` (multiclass_nms: candidates per box): then also
    cupyprep_nms_emit's detections ``det_boxes`` (B, max_det, 4), ``det_scores`` (B,
    max_det) and ``det_index`` (B, max_det).

    ``grouped`` (batched_nms: one segment, classes from ``class_src``): candidates sorted by
    class, then score; each class is reduced on its own and the kept ids put back in score
    order by a final sort. ``too_large``: what the error for a mask larger than the
    device adds (what the caller can pass to bound it). ``score_threshold`` with a mask
    over ``NmsSpec.mask_budget`` reads a count back: that plan holds for these scores only
    (``plan.reusable`` is False)."""
    i32, i64, f32 = np.int32, np.int64, np.float32
    spec = nms_spec.SPEC
    best = cls_mode == nms_spec.CLASS_BEST
    S = N if (best or cls_mode != nms_spec.CLASS_PER_CANDIDATE) else N * C
    Kc = S if top_k is None else min(S, top_k)
    counted = score_threshold is not None and mask_bytes(B, Kc) > spec.mask_budget
    if counted:
        # size the mask by the candidates that pass (counted with >=, a superset of the
        # keys kernel's >; a box counts once in the best-class mode): at least that many
        # slots select the same candidates as S
        passing = scores >= np.float32(score_threshold)
        if best:
            passing = passing.any(axis=-1)
        Kc = max(1, min(Kc, int(_transfers.read_back(
            passing.reshape(B, -1).sum(axis=1).max(),
            "the count of candidates passing score_threshold (without top_k their mask would "
            "pass 1 GiB)", "pass top_k"))))
    need = mask_bytes(B, Kc)
    if call.xp is not np and need > spec.mask_budget:
        total_memory = call.xp.cuda.runtime.memGetInfo()[1]
        if need > total_memory:
            raise ValueError(
                f"scores: NMS over up to {Kc} candidates per image needs a {need / 2**30:.1f} GiB "
                f"suppression mask for {B} image(s), more than the device's "
                f"{total_memory / 2**30:.1f} GiB{too_large}")
    cb = (Kc + 63) // 64
    total = B * S
    # one segment: 32-bit keys (the segment part is zero) sort faster
    key_type, key_dtype = ("int", np.int32) if (B == 1 and not grouped) else ("long long", np.int64)
    classes = cls_mode != nms_spec.CLASS_NONE
    # one segment of few keys: argsorted by one block (cupyprep_nms_small, or _small_sort)
    small = key_dtype == np.int32 and total <= spec.small_sort
    tri = B * 64 * (cb * (cb + 1) // 2)
    scratch = {
        "keys": ((total,), key_dtype),
        "perm": ((total,), np.int64) if small else None,
        "best": ((total,), np.int64) if best else None,
        "sboxes": ((B * Kc * 4,), np.float32),
        "sid": ((B * Kc,), np.int64),
        "mcount": ((B,), np.int32),
        "scls": ((B * Kc,), np.int64) if classes else None,
        # the reduce's state, zeroed by the gather: a ticket word, the grouped count, and
        # two words per chunk
        "state": ((2 + 2 * B * cb,), np.uint64),
        "first": ((cb,), np.int32) if grouped else None,
        "kept": ((cb,), np.uint64) if grouped else None,
        "final": ((Kc,), np.int64) if grouped else None,
    }
    # what the caller gets: kept ids (and their classes), -1 past each count (pre-filled
    # by the gather, except where the final class-sorted step writes every slot), then
    # the counts
    rows = 2 if want_classes else 1
    results = {"ids": ((rows, B, max_det), np.int64), "counts": ((B,), np.int64)}
    if emit_per_box is not None:
        results.update(det_boxes=((B, max_det, 4), boxes.dtype), det_scores=((B, max_det), scores.dtype),
                       det_index=((B, max_det), np.int64))
    layout = Layout()
    if need <= spec.one_allocation:
        layout.add({**scratch, "mask": ((tri,), np.uint64), **results})
    else:
        # the mask on its own: at 100k boxes it is most of the memory, and a separate
        # allocation lets the caching allocator reuse the small ones around it (and the
        # caller's results keep no scratch alive)
        layout.add(scratch)
        layout.add({"mask": ((tri,), np.uint64)})
        layout.add(results)
    plan = Plan(layout)
    slot = plan.slot
    boxes_in, scores_in, classes_in = INPUTS
    classes_in = None if class_src is None else classes_in
    keys, best_arr = slot("keys"), slot("best")
    has_thr = score_threshold is not None
    sboxes, sid, mcount, scls = slot("sboxes"), slot("sid"), slot("mcount"), slot("scls")
    n_state = 2 + 2 * B * cb
    state = slot("state")
    out = slot("ids")
    counts = slot("counts")
    n_fill = 0 if grouped else rows * B * max_det
    src = best_arr if best else classes_in
    m = 1 << max(total - 1, 1).bit_length()  # the one-block sort's size: a power of two >= total, >= 2
    if small and max(n_state, n_fill) <= spec.small_sort:
        # keys, sort and gather in one block (its loops over the state and the outputs short)
        perm = slot("perm")
        fn = plan.kernel(_kernels.get_function(nms_spec.FILE, spec.small_expr(scores.dtype, boxes.dtype, cls_mode)))
        fn((1,), (max(32, min(1024, m // 2)),),
           (scores_in, i64(s_strides[1]), i64(s_strides[2]), i32(N), i32(C), i32(has_thr),
            f32(score_threshold if has_thr else 0.0), keys, best_arr, i32(m), perm, boxes_in, i64(b_strides[1]),
            i64(b_strides[2]), classes_in, i64(s_cls), i32(Kc), sboxes, scls, sid, mcount, state, i64(n_state),
            out, i64(n_fill)))
    else:
        fn = plan.kernel(_kernels.get_function(nms_spec.FILE, spec.keys_expr(scores.dtype, best, key_type)))
        launch_1d(fn, total, (scores_in, i64(s_strides[0]), i64(s_strides[1]), i64(s_strides[2]), i32(N),
                              i32(C), i32(has_thr), f32(score_threshold if has_thr else 0.0),
                              classes_in if grouped else None, i64(s_cls if grouped else 0), i64(total),
                              keys, best_arr))
        if small:
            perm = slot("perm")
            plan.kernel(_kernels.get_function(nms_spec.FILE, "cupyprep_nms_small_sort"))(
                (1,), (max(32, min(1024, m // 2)),), (keys, i32(total), i32(m), perm))
        else:
            perm = plan.sort(_run_argsort, "keys")
        fn = plan.kernel(_kernels.get_function(nms_spec.FILE, spec.gather_expr(boxes.dtype, cls_mode, key_type)))
        launch_1d(fn, max(B * Kc, n_state, n_fill),
                  (boxes_in, i64(b_strides[0]), i64(b_strides[1]), i64(b_strides[2]), keys, perm, src, i64(s_cls),
                   i64(S), i32(C), i32(Kc), i64(B * Kc), sboxes, scls, sid, mcount, state, i64(n_state),
                   out, i64(n_fill)))
    first = None
    if grouped:
        first = slot("first")
        launch_1d(plan.kernel(_kernels.get_function(nms_spec.FILE, "cupyprep_nms_first_chunk")), cb,
                  (scls, i32(cb), first))
    half = boxes.dtype == np.float16
    # best-class candidates carry a class for the output but suppress across classes
    mask_classes = cls_mode == nms_spec.CLASS_FROM_BOX or (cls_mode == nms_spec.CLASS_PER_CANDIDATE and C > 1)
    mask = slot("mask")
    fn = plan.kernel(_kernels.get_function(nms_spec.FILE, spec.mask_expr(half, mask_classes, grouped)))
    fn((cb, max(1, min((cb + 1) // 2, spec.mask_y)), B), (64,),
       (sboxes, scls, mcount, first, i32(Kc), i32(cb), f32(iou_threshold), mask))
    # the state's words: the reduce's ticket (uint32), the grouped count, the chunk chain
    ticket = slot("state", 0, np.uint32, (2,))
    chain = slot("state", 16, np.uint64, (n_state - 2,))
    ids = slot("ids", 0, np.int64, (B, max_det))
    cls_out = slot("ids", B * max_det * 8, np.int64, (B, max_det)) if want_classes else None
    kept = slot("kept")
    fn = plan.kernel(_kernels.get_function(nms_spec.FILE, spec.reduce_expr(grouped)))
    fn((B * cb,), (32,), (mask, mcount, first, sid, scls if want_classes else None, i32(Kc), i32(cb),
                          i32(max_det), chain, ticket, ids, cls_out,
                          slot("state", 8, np.int64, (1,)) if grouped else counts, kept))
    if grouped:
        final = slot("final")
        launch_1d(plan.kernel(_kernels.get_function(nms_spec.FILE, spec.final_keys_expr(scores.dtype))), Kc,
                  (scores_in, i64(s_strides[1]), sid, kept, i32(Kc), final))
        ordered = plan.sort(_run_sorted, "final")
        launch_1d(plan.kernel(_kernels.get_function(nms_spec.FILE, "cupyprep_nms_final_ids")), max_det,
                  (ordered, slot("state", 8, np.uint64, (1,)), i32(max_det), ids, counts))
    if emit_per_box is not None:
        fn = plan.kernel(_kernels.get_function(nms_spec.FILE, spec.emit_expr(boxes.dtype, scores.dtype)))
        launch_1d(fn, B * max_det, (boxes_in, i64(b_strides[0]), i64(b_strides[1]), i64(b_strides[2]), scores_in,
                                    i64(s_strides[0]), i64(s_strides[1]), i64(s_strides[2]), ids, cls_out,
                                    i32(emit_per_box), i32(max_det), i64(B * max_det), slot("det_boxes"),
                                    slot("det_scores"), slot("det_index")))
        plan.results.update((k, layout.region(k)) for k in ("det_boxes", "det_scores", "det_index"))
    plan.reusable = not counted
    plan.results.update(
        ids=layout.region("ids", 0, np.int64, (B, max_det)),
        classes=layout.region("ids", B * max_det * 8, np.int64, (B, max_det)) if want_classes else None,
        counts=layout.region("counts"),
        indices=layout.region("ids", 0, np.int64, (max_det,)),
        count=layout.region("counts", 0, np.int64, ()))
    return plan.seal()


def _run_argsort(call, native, view):
    return _argsort(call, native, view)


def _run_sorted(call, native, view):
    return _sorted(call, native, view)


def finish(plan, carve, return_count):
    """One segment's kept indices, or the sync-free pair ``(indices padded with -1,
    count)``."""
    results = plan.results
    indices = carve.array(results["indices"])
    count = carve.array(results["count"])
    if return_count:
        return indices, count
    k = int(_transfers.read_back(count, "the number of boxes kept",  # the one 8-byte read
                                 "pass return_count=True (a padded result and its count, on the device)"))
    return indices[:k]


def empty_result(call, return_count):
    """nms of no boxes: empty indices, or the sync-free pair (empty, count 0)."""
    if call.kind == "torch":
        import torch

        dev = call.tensor.device
        idx = torch.empty((0,), dtype=torch.int64, device=dev)
        return (idx, torch.zeros((), dtype=torch.int64, device=dev)) if return_count else idx
    xp = call.xp
    idx = xp.empty((0,), np.int64)
    return (idx, xp.zeros((), np.int64)) if return_count else idx
