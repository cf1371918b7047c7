"""The warp ops' common path (warp_affine, warp_perspective, align_faces, random_affine,
cv2compat's warps): reading images and matrices, inverting the matrices as OpenCV does,
choosing the kernel (:func:`choose_path`) and launching it.

Three kernels can make a warp, all with the same results bit for bit:

- "staged" (warp_staged.cu): uint8 linear affine warps of 3 or 4 channels with a constant
  border whose sources are word-aligned; a block makes a square output tile from the
  tile's source box, copied once into shared memory with the border value around it.
- "dense" (warp.cu, DENSE=true): nearest, linear and cubic where every pixel's channels
  are adjacent in the sources and the output; strides known at compile time, pixels
  read and stored as words, several pixels a thread.
- "strided" (warp.cu): any strides; also OpenCV's fixed-point remap for 2 channels.

A repeated call (one image, a batch or a list of up to 64 images, with the geometry,
matrix form and options of an earlier call) launches that call's plan (:mod:`cupyprep._plans`): only the matrix is read
and inverted again.
"""
from __future__ import annotations

import functools
import math
import struct
from typing import NamedTuple

import numpy as np

from . import _arrays, _kernels, _matrix_math, _plans, _transfers, _validate
from ._arrays import dense_pixels, unwrap, xp_of
from ._launch import BLOCK_3D, by_value, launch_3d, no_ragged
from ._specs import warp as warp_spec
from ._specs._common import IMAGES_BY_VALUE
from .cpu.geometry import warp as _cpu_warp

__all__ = ["warp_images", "gather_images", "choose_path", "WarpPath"]

# Launch plans (see _plans) of the warps' plain calls: one image, a batch or a list that
# goes by value, keyed by the geometry, the options, the matrix's form and whether every
# image's first byte is word-aligned (which chooses the staged kernel or not)
_PLANS = _plans.PlanCache()


class WarpPath(NamedTuple):
    """Which kernel makes a warp (``"staged"``, ``"dense"`` or ``"strided"``) and why."""

    name: str
    reason: str


def choose_path(kernel, dtype, channels, border_mode, perspective, pixels_dense, aligned, tiles):
    """The kernel that makes a warp on the GPU, and why (the one place that decides it).

    ``kernel``: :meth:`WarpSpec.kernel`'s implementation ("nearest", "linear", "cubic" or
    a "_fixed" remap); ``pixels_dense``: every pixel's channels adjacent in the sources and
    the output; ``aligned``: every source's first byte and image and row strides are
    multiples of 4 bytes (a bool, or a function asked only when it matters: a long list's
    test costs host time); ``tiles``: the staged kernel's output tiles.
    """
    spec = warp_spec.SPEC
    if kernel not in warp_spec.FLOAT_KERNELS:
        return WarpPath("strided", f"{kernel}: OpenCV's fixed-point remap (2 channels) has one kernel")
    if not spec.dense:
        return WarpPath("strided", "the dense kernels are off (WarpSpec.dense)")
    if not pixels_dense:
        return WarpPath("strided", "the sources' or the output's pixels are not contiguous")
    ok, reason = _staged_eligible(spec, kernel, dtype, channels, border_mode, perspective,
                                  aligned, tiles)
    return WarpPath("staged" if ok else "dense", reason)


def _staged_eligible(spec, kernel, dtype, channels, border_mode, perspective, aligned, tiles):
    """``(ok, reason)``: whether the staged kernel takes a warp the dense kernel could make."""
    if not spec.staged:
        return False, "the staged kernel is off (WarpSpec.staged)"
    if perspective:
        return False, "a perspective warp (the staged kernel is affine)"
    if kernel != "linear":
        return False, f"{kernel} interpolation (the staged kernel is linear)"
    if np.dtype(dtype) != np.uint8:
        return False, f"{np.dtype(dtype).name} pixels (the staged kernel reads uint8)"
    if channels not in spec.staged_channels:
        return False, f"{channels} channels (the staged kernel takes {spec.staged_channels})"
    if border_mode != "constant":
        return False, f"border_mode {border_mode!r} (the staged kernel's border is constant)"
    if not (aligned() if callable(aligned) else aligned):
        return False, "a source's first byte or row stride is not a multiple of 4"
    if tiles >= 2**31:
        return False, f"{tiles} output tiles (the staged kernel counts fewer than 2**31)"
    return True, (f"uint8 linear affine, {channels} channels, constant border, word-aligned "
                  "sources: each output tile from its source box in shared memory")


@functools.lru_cache(maxsize=None)
def inter_tables():
    """OpenCV's initInterTab2D for INTER_LINEAR at 32x32 sub-pixel positions (the fixed-point
    remap's tables): float32 weights (vy * vx of the 1-D kernels at i / 32) and int16
    weights (rounded * 2^15, corrected so each set sums to exactly 2^15 at its largest /
    smallest central weight)."""
    f32 = np.float32
    t = np.arange(32, dtype=f32) * f32(1.0 / 32)
    k = 2
    one_d = np.stack([f32(1) - t, t], axis=1).astype(f32)
    kk = k * k
    ftab = np.empty((32, 32, k, k), f32)
    itab = np.zeros(32 * 32 * kk, np.int64)  # flat, as OpenCV's static table
    for i in range(32):
        for j in range(32):
            w = (one_d[i][:, None] * one_d[j][None, :]).astype(f32)
            ftab[i, j] = w
            base = (i * 32 + j) * kk
            itab[base:base + kk] = np.clip(np.rint(w.astype(np.float64) * 32768), -32768, 32767).ravel()
            diff = int(itab[base:base + kk].sum()) - 32768
            if diff:
                # OpenCV corrects the sum at the largest / smallest of the central 2x2
                # weights; for the 2x2 kernel its search window runs into the next
                # (still zero) entry, which is reproduced here by indexing the flat table
                h = k // 2
                mk = Mk = base + h * k + h
                for k1 in range(h, h + 2):
                    for k2 in range(h, h + 2):
                        o = base + k1 * k + k2
                        if itab[o] < itab[mk]:
                            mk = o
                        elif itab[o] > itab[Mk]:
                            Mk = o
                if diff < 0:
                    itab[Mk] -= diff
                else:
                    itab[mk] -= diff
    itab = itab.astype(np.int16)
    return itab, ftab.reshape(-1)


def gather_images(images, name):
    """``(prepared_first, arrays or batch, uniform, geometry tuple)`` for an image argument:
    HW, HWC, NHWC or a list of HW / HWC images."""
    if isinstance(images, (list, tuple)):
        first, arrays = _arrays.prepare_list(images, name)
        _validate.dtype_in(f"{name}[0]", arrays[0], warp_spec.DTYPES)
        # the output has a channel axis or not as the images do: one form for the list
        c = _validate.list_images(name, arrays)
        return first, arrays, False, (len(arrays), c, arrays[0].ndim == 3)
    first = _arrays.prepare(images, name)
    arr = first.array
    _validate.dtype_in(name, arr, warp_spec.DTYPES)
    if arr.ndim == 4 and arr.shape[0] == 0:
        if arr.shape[1] <= 0 or arr.shape[2] <= 0 or arr.shape[3] <= 0:
            raise ValueError(f"{name}: expected non-empty images, got {_arrays.describe(arr)}")
        return first, arr, True, (0, arr.shape[3], True)
    geo = _validate.image_layout(name, arr, "NHWC" if arr.ndim == 4 else "HWC")
    return first, arr, True, (geo.n, geo.c, geo.has_channels)


def check_matrices(name, matrix, rows, count, call):
    """Validate ``matrix`` ((rows, 3) or (count, rows, 3)); numpy or the image's kind.
    Returns a float64 array (numpy, or cupy on the image's device)."""
    if _arrays.is_torch(matrix) or _arrays.is_cupy(matrix):
        m = call.convert(matrix, name) if call.device else unwrap(matrix)[0]
    else:
        try:
            m = np.asarray(matrix, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"{name}: expected a ({rows}, 3) array of numbers, got {matrix!r}") from None
    xp = xp_of(m)
    if m.dtype != np.float64:
        m = xp.asarray(m, dtype=xp.float64)
    if m.shape == (rows, 3):
        pass
    elif m.ndim == 3 and m.shape[1:] == (rows, 3):
        if m.shape[0] != count:
            raise ValueError(f"{name}: expected one matrix or {count} (one per image), got "
                             f"{m.shape[0]} ({_arrays.describe(m)})")
    else:
        raise ValueError(f"{name}: expected shape ({rows}, 3) or ({count}, {rows}, 3), "
                         f"got {_arrays.describe(m)}")
    # host matrices are checked for finite values here; device ones are not read for it
    # (a non-finite coordinate samples the border). Their singularity test in inverse
    # does read one flag back.
    if xp is np and m.size and not np.all(np.isfinite(m)):
        raise ValueError(f"{name}: expected finite values, got NaN or infinity")
    return m


def inverse(m, perspective, inverse_map, name):
    """Destination-to-source matrices in float64, inverted as OpenCV inverts them."""
    xp = xp_of(m)
    if inverse_map:
        return m
    if not perspective:
        return _matrix_math.invert_affine(m, xp, lambda k: _matrix_math.singular_affine(_matrix_math.item(name, k)))
    if xp is np and m.ndim == 2:
        # one host matrix (the usual call): the batch's test and inversion below, without
        # the batch's indexing and stacking (a quarter of the host time)
        if np.linalg.det(m) == 0:
            raise ValueError(f"{name}: singular perspective matrix (determinant 0) cannot be inverted")
        from .cpu import cv2_module

        cv2 = cv2_module()
        return cv2.invert(np.ascontiguousarray(m), flags=cv2.DECOMP_LU)[1]
    if xp is not np:  # before CuPy's det: it calls cuBLAS, which a capture refuses too
        _transfers.refuse_under_capture(*_matrix_math.SINGULARITY_READ)
    k = _matrix_math.first_zero(xp.linalg.det(m), xp)
    if k is not None:
        raise ValueError(f"{_matrix_math.item(name, k if m.ndim == 3 else None)}: singular perspective matrix "
                         "(determinant 0) cannot be inverted")
    if xp is np:
        # cv2.warpPerspective inverts with cv::invert (LU); use it where it is at hand
        from .cpu import cv2_module

        cv2 = cv2_module()
        flat = m.reshape(-1, 3, 3)
        return np.stack([cv2.invert(k, flags=cv2.DECOMP_LU)[1] for k in flat]).reshape(m.shape)
    return xp.linalg.inv(m)


_NO_MAT = by_value((), np.float64, 9)  # the by-value matrix of a launch that reads an array of them
_MAT = struct.Struct("=9d")


def _mat_value(flat):
    """One host (2, 3) or (3, 3) matrix's values (row by row, Python floats) as the
    kernels' ``ByValue<double, 9>``, zeros after them."""
    return np.frombuffer(bytearray(_MAT.pack(*flat, *(0.0,) * (9 - len(flat)))), _NO_MAT.dtype)[0]


def _one_matrix_value(m, flat, perspective, inverse_map, name):
    """:func:`inverse` of one finite host (rows, 3) float64 matrix ``m`` (its values
    ``flat``, row by row) as the kernels' by-value argument: no upload (a CUDA graph keeps
    its values)."""
    if inverse_map:
        return _mat_value(flat)
    if perspective:
        return _mat_value(inverse(m, True, False, name).ravel().tolist())
    return _mat_value(_matrix_math.invert_affine_values(flat, lambda k: _matrix_math.singular_affine(name)))


def _host_matrix_value(matrix, perspective, inverse_map, name):
    """:func:`check_matrices` and :func:`_one_matrix_value` of a host (rows, 3) ndarray of
    numbers (the shape and dtype of a plan's key)."""
    m = matrix if matrix.dtype == np.float64 else matrix.astype(np.float64)
    flat = m.ravel().tolist()
    if not all(map(math.isfinite, flat)):
        raise ValueError(f"{name}: expected finite values, got NaN or infinity")
    return _one_matrix_value(m, flat, perspective, inverse_map, name)


def _matrix_args(xp, inv, rows, name):
    """``(mats, mat_step, mat_value)`` of destination-to-source matrices other than one
    host matrix: uploaded (host ones) and read by the kernel from device memory."""
    mats = xp.ascontiguousarray(_transfers.upload(
        xp, inv, f"{name} (a batch of host matrices)", "pass them on the images' "
        "device, or one matrix (which goes by value)", np.float64))
    return mats, (rows * 3 if mats.ndim == 3 else 0), _NO_MAT


def _plan_key(images, matrix, out, options):
    """``(kind, key)`` of a warp call that can have a plan (see ``_PLANS``), else None."""
    found = _plans.call_key(images, out, options, IMAGES_BY_VALUE)
    if found is None:
        return None
    if type(matrix) is np.ndarray:
        if matrix.dtype.kind not in "fiu":
            return None
        form = matrix.dtype, matrix.shape
    else:
        form = _plans.array_key(matrix)
        if form is None:
            return None
    kind, key = found
    if type(images) is list or type(images) is tuple:  # (the staged kernel reads words of each)
        aligned = all(_plans.address(a) % 4 == 0 for a in images)
    else:
        aligned = _plans.address(images) % 4 == 0
    return kind, (key, form, aligned)


def _replay(plan, images, kind, matrix, out, perspective, inverse_map, name, matrix_name):
    """A plan's launch with this call's matrix (checked and inverted as the general path
    does); None where ``out`` overlaps the image."""
    if type(matrix) is np.ndarray and matrix.ndim == 2:
        return plan.run(images, kind, out, (None, _host_matrix_value(matrix, perspective, inverse_map,
                                                                     matrix_name)))
    rows, n_out, _ = plan.extra
    call = _arrays.prepare(images[0] if type(images) is list or type(images) is tuple else images, name)
    with call.launch():
        m = check_matrices(matrix_name, matrix, rows, n_out, call)
        mats, _, value = _matrix_args(call.xp, inverse(m, perspective, inverse_map, matrix_name), rows,
                                      matrix_name)
        return plan.run(images, kind, out, (mats, value))


def warp_images(images, matrix, size, interpolation, border_mode, border_value, inverse_map, out,
                perspective, src_index=None, name="img", matrix_name="M", checked=False,
                gathered=None):
    """The warp ops' common path; ``gathered``: what gather_images(images, name) returned,
    when the caller has it already. Everything after reading the images runs on their
    device and stream (the matrices' conversion and inversion too)."""
    key = None
    if src_index is None and gathered is None and not checked:
        # (the names only go into error messages, which a replay words with its own)
        kind, key = _plan_key(images, matrix, out, (size, interpolation, border_mode, border_value,
                                                    inverse_map, perspective)) or (None, None)
        plan = None if key is None else _PLANS.get(key)
        if plan is not None and plan.extra[2] is warp_spec.SPEC:  # (planned with the tuning in force)
            done = _replay(plan, images, kind, matrix, out, perspective, inverse_map, name, matrix_name)
            if done is not None:
                return done
    call, arrays, uniform, (n_src, c, has_channels) = gathered or gather_images(images, name)
    dh, dw = _validate.size_hw("size", size)
    interpolation = _validate.choice("interpolation", interpolation, warp_spec.INTERPOLATIONS)
    border_mode = _validate.choice("border_mode", border_mode, warp_spec.BORDER_MODES)
    inverse_map = _validate.flag("inverse_map", inverse_map)
    dtype = np.dtype(arrays.dtype if uniform else arrays[0].dtype)
    if c > 4:
        raise ValueError(f"{name}: expected 1 to 4 channels, got {c}")
    batched = not uniform or arrays.ndim == 4 or src_index is not None
    n_out = n_src if src_index is None else len(src_index)
    rows = 3 if perspective else 2
    with call.launch():
        m = matrix if checked else check_matrices(matrix_name, matrix, rows, n_out, call)
        # OpenCV's border value is stored as the image type; float16 images are warped in
        # float32 and rounded once, so theirs stays float32
        bval = _validate.fill_values("border_value", border_value, c, dtype, np.float32, name)
        out_shape = (dh, dw) + ((c,) if has_channels else ())
        if batched:
            out_shape = (n_out,) + out_shape
        if n_out == 0:
            native, _ = call.output(out, out_shape, dtype)
            return native
        # one host matrix goes to the kernels by value: no upload (a CUDA graph keeps its values)
        one = call.device and xp_of(m) is np and m.ndim == 2
        inv = None if one else inverse(m, perspective, inverse_map, matrix_name)
        mat_value = (_one_matrix_value(m, m.ravel().tolist(), perspective, inverse_map, matrix_name)
                     if one else None)
        if not call.device:
            mats = np.broadcast_to(_transfers.to_host(inv), (n_out, rows, 3))
            imgs = (list(arrays) if uniform and arrays.ndim == 4 else
                    [arrays] if uniform else arrays)
            idx = range(n_out) if src_index is None else _transfers.to_host(src_index)
            res = np.empty(out_shape if batched else (1,) + out_shape, dtype)
            _cpu_warp([imgs[int(k)] for k in idx], mats, (dh, dw), interpolation, border_mode, bval,
                      perspective, res)
            return call.result(res if batched else res[0], out)
        xp = call.xp
        spec = warp_spec.SPEC
        kernel = spec.kernel(interpolation, c)
        i64, i32, f32 = np.int64, np.int32, np.float32
        if uniform:
            st = _arrays.element_strides(arrays, name)
            if arrays.ndim == 4:
                s_n, s_y, s_x, s_c = st
                sh, sw = arrays.shape[1:3]
            else:
                s_n = 0
                s_y, s_x = st[:2]
                s_c = st[2] if arrays.ndim == 3 else 0
                sh, sw = arrays.shape[:2]
            tables = (arrays, None, no_ragged(), i32(sh), i32(sw), i64(s_n), i64(s_y), i64(s_x), i64(s_c))
            src_dense = dense_pixels((s_x, s_c), c)
            src_steps = (s_n, s_y)  # image and row strides, in bytes for uint8
        else:
            strides = []
            for a in arrays:
                st = _arrays.element_strides(a, name)
                strides.append(st[:2] + ([st[2]] if a.ndim == 3 else [0]))
            src_dense = all(dense_pixels(st[1:], c) for st in strides)
            src_steps = [st[0] for st in strides]
            # per-image records by value, or (a long list) one uploaded table
            sizes = [a.shape[:2] for a in arrays]
            table, records, _ = _transfers.ragged(arrays, name, sizes, strides, xp)
            tables = (None, table, records, i32(0), i32(0), i64(0), i64(0), i64(0), i64(0))
        index = None if src_index is None else _transfers.upload(
            xp, src_index, "image_index", "pass it on the images' device", np.int32)
        if one:
            mats, mat_step = None, 0
        else:
            mats, mat_step, mat_value = _matrix_args(xp, inv, rows, matrix_name)
        itab = ftab = None
        if kernel == "linear_fixed":  # nearest_fixed reads no weights
            table = _transfers.device_constant(
                xp, ("inter", dtype == np.uint8), lambda: inter_tables()[0 if dtype == np.uint8 else 1],
                "the warp's interpolation table", "make one such call before the capture (the "
                "table then stays on the device)")
            itab, ftab = (table, None) if dtype == np.uint8 else (None, table)
        body_end = dw // warp_spec.OPENCV_WARP_STEP * warp_spec.OPENCV_WARP_STEP
        bv = [f32(v) for v in bval + (0.0,) * (4 - c)]
        with call.writing(out, out_shape, dtype, [arrays] if uniform else arrays) as (native, dst):
            d = _arrays.element_strides(dst, "out")
            if has_channels:
                d_n, d_y, d_x, d_c = d if batched else [0] + d
            else:
                (d_n, d_y, d_x), d_c = (d if batched else [0] + d), 0
            # dense: every pixel's channels adjacent, in every source and in the output (the
            # kernel then knows those strides at compile time and moves words)
            sources = [arrays] if uniform else arrays
            path = choose_path(kernel, dtype, c, border_mode, perspective,
                               src_dense and dense_pixels((d_x, d_c), c),
                               lambda: _staged_aligned(sources, src_steps),
                               _staged_tiles(dh, dw, n_out))
            dense = path.name != "strided"
            pixels = spec.pixels(kernel, dtype, c, border_mode) if dense else 1
            thread_rows = spec.rows(kernel, pixels) if dense else spec.rows_per_thread
            args = tables + (
                index, mats, i64(mat_step), mat_value, dst, i32(dh), i32(dw), i64(d_n), i64(d_y), i64(d_x),
                i64(d_c), i32(warp_spec.BORDER_MODES.index(border_mode)), *bv, i32(body_end), itab, ftab,
                i32(n_out), i32(thread_rows))
            if path.name == "staged":
                # the same arguments, then its work's split: it reads no tables and no rows
                # a block
                fn = _kernels.get_function(warp_spec.STAGED_FILE, spec.staged_expr(c, not uniform))
                grid, split = staged_launch(dh, dw, n_out)
                shape = None
                if grid:
                    args += split
                    shape = (grid, 1, 1), (spec.staged_threads, 1, 1)
                    fn(*shape, args)
            else:
                fn = _kernels.get_function(warp_spec.FILE, spec.expr(
                    "perspective" if perspective else "affine", kernel, dtype, c, dense, pixels,
                    dense and not uniform))
                block_x = spec.block_x if dense else BLOCK_3D
                shape = launch_3d(fn, n_out, (dh + thread_rows - 1) // thread_rows,
                                  (dw + pixels - 1) // pixels, args, block_x=block_x,
                                  block_y=BLOCK_3D // block_x)
            # the plan of the next such call (a key: one image, a batch or a list whose
            # records go by value); none for a launch that reads the interpolation tables,
            # which device_constant hands out at every call (ordering another stream after
            # their upload)
            if (shape is not None and key is not None and itab is None and ftab is None
                    and (uniform or tables[1] is None) and _plans.unstaged(sources, out)):
                at = len(tables)  # index, mats, mat_step, mat_value, dst
                _PLANS.put(key, _plans.LaunchPlan(
                    fn, *shape, args, (0 if uniform else None, at + 4), out_shape, dtype, (rows, n_out, spec),
                    None if uniform else (2, sizes, strides), per_call=(at + 1, at + 3)))
        return native


def _staged_tiles(dh, dw, n_out):
    tile = warp_spec.SPEC.staged_tile
    return -(-dh // tile) * -(-dw // tile) * n_out


def staged_launch(dh, dw, n_out):
    """The staged kernel's grid (blocks along x; 0: nothing to make) and its split of the
    work, ``(group, grouped)`` as int32: the tiles in order, image by image and row by row,
    `group` a block for the first `grouped` blocks, then one a block. Past 2^31 - 1 blocks
    the kernel's blocks loop over more."""
    spec = warp_spec.SPEC
    tiles = _staged_tiles(dh, dw, n_out)
    group = spec.staged_group
    singles = min(tiles, math.ceil(spec.staged_single_waves * _kernels.multiprocessors() * spec.staged_blocks))
    grouped = (tiles - singles) // group
    blocks = tiles - (group - 1) * grouped
    return min(blocks, 2 ** 31 - 1), (np.int32(group), np.int32(grouped))


def _staged_aligned(sources, steps):
    """Whether the staged kernel's word reads are aligned: every source's first byte and
    the image and row strides (bytes) ``steps`` multiples of 4."""
    def address(a):  # NumPy under the emulator
        return a.__array_interface__["data"][0] if isinstance(a, np.ndarray) else a.data.ptr

    return all(address(a) % 4 == 0 for a in sources) and all(v % 4 == 0 for v in steps)