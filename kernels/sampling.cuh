// Resampling with cv2.resize semantics, shared by resize.cu and preprocess.cu so both give
// the same bits. Every interpolation is split the way OpenCV splits it: taps along x
// (source columns, weights) and taps along y (source rows, weights) that depend on one
// coordinate each, then a blend of the taps. Kernels that produce many pixels of one row
// or column compute the taps of that axis once; `sample_<interpolation>` does one pixel.
// The image is addressed by element strides (s_y, s_x, s_c); results are CN values of the
// image's own type T, rounded exactly as cv2.resize stores them.
#pragma once
#include "common.cuh"

namespace cp {

// INTERP_AREA: INTER_AREA's fast regime only (integer factors; sample_area_fast), the one
// area algorithm that is a per-pixel formula.
enum { INTERP_NEAREST = 0, INTERP_LINEAR = 1, INTERP_CUBIC = 2, INTERP_AREA = 3 };

// Taps along one axis: up to four source indices (columns already times s_x), their
// float weights and, for uint8, OpenCV's fixed-point weights rint(w * 2048). Along x,
// `body` is how many of the pixel's CN elements fall in OpenCV's SIMD body (cubic).
struct Taps {
    i64 off[4];
    float w[4];
    int iw[4];
    int body;
};

// OpenCV's linear and cubic source coordinate: (d + 0.5) * scale - 0.5 in double (product
// and sum rounded apart: OpenCV's x86 build has no FMA, and a fused result can round to
// another float), rounded to float, split into floor and fraction.
__device__ __forceinline__ void linear_coord(int d, double scale, int& s, float& f) {
    const float fs = (float)__dadd_rn(__dmul_rn(d + 0.5, scale), -0.5);
    s = __float2int_rd(fs);
    f = __fsub_rn(fs, (float)s);
}

// OpenCV's interpolateCubic with A = -0.75, in float32 and in its order: the last weight
// is 1 minus the others, so the four sum to exactly 1 as OpenCV's do.
__device__ __forceinline__ void cubic_weights(float t, float w[4]) {
    const float x1 = __fadd_rn(t, 1.f), u = __fsub_rn(1.f, t);
    // ((A*x - 5A)*x + 8A)*x - 4A at x = t + 1
    w[0] = __fadd_rn(
        __fmul_rn(__fsub_rn(__fmul_rn(__fadd_rn(__fmul_rn(-0.75f, x1), 3.75f), x1), 6.f), x1),
        3.f);
    // ((A + 2)*x - (A + 3))*x*x + 1 at x = t and at x = 1 - t
    w[1] = __fadd_rn(__fmul_rn(__fmul_rn(__fsub_rn(__fmul_rn(1.25f, t), 2.25f), t), t), 1.f);
    w[2] = __fadd_rn(__fmul_rn(__fmul_rn(__fsub_rn(__fmul_rn(1.25f, u), 2.25f), u), u), 1.f);
    w[3] = __fsub_rn(__fsub_rn(__fsub_rn(1.f, w[0]), w[1]), w[2]);
}

// INTER_NEAREST: s = min(floor(d * scale), size - 1).
__device__ __forceinline__ Taps nearest_taps(int d, double scale, int size, i64 stride) {
    Taps t;
    t.off[0] = (i64)min(__double2int_rd(__dmul_rn((double)d, scale)), size - 1) * stride;
    t.w[0] = 1.f;
    t.iw[0] = 0;
    t.body = 0;
    return t;
}

// INTER_LINEAR taps of source coordinate s + f. Along x (clamp_fraction) the fraction is
// clamped to 0 at the edges (OpenCV clamps sx and sets fx = 0 there); along y only the
// row indices are clamped and the weights keep their fraction, as OpenCV does.
__device__ __forceinline__ Taps linear_taps_at(int s, float f, int size, i64 stride,
                                               bool clamp_fraction) {
    int s1;
    if (clamp_fraction) {
        if (s < 0) { s = 0; f = 0.f; }
        if (s >= size - 1) { s = size - 1; f = 0.f; }
        s1 = min(s + 1, size - 1);
    } else {
        s1 = clamp_index(s + 1, 0, size - 1);
        s = clamp_index(s, 0, size - 1);
    }
    Taps t;
    t.off[0] = (i64)s * stride;
    t.off[1] = (i64)s1 * stride;
    t.w[0] = __fsub_rn(1.f, f);
    t.w[1] = f;
    t.iw[0] = __float2int_rn(__fmul_rn(t.w[0], 2048.f));
    t.iw[1] = __float2int_rn(__fmul_rn(f, 2048.f));
    t.body = 0;
    return t;
}

// INTER_LINEAR taps of destination index d (see linear_taps_at).
__device__ __forceinline__ Taps linear_taps(int d, double scale, int size, i64 stride,
                                            bool clamp_fraction) {
    int s;
    float f;
    linear_coord(d, scale, s, f);
    return linear_taps_at(s, f, size, stride, clamp_fraction);
}

// INTER_CUBIC taps: neither the weights nor s change at the edges; only the tap indices
// are clamped. Along x, `body` counts the elements of this pixel (e = d * CN + c) inside
// OpenCV's vector body, which covers the first (row_elems / L) * L elements of a row
// (L = 8 lanes for uint8 / uint16, 4 for floats; row_elems = dst_w * CN).
template <typename T, int CN>
__device__ __forceinline__ Taps cubic_taps(int d, double scale, int size, i64 stride,
                                           i64 row_elems) {
    int s;
    float f;
    linear_coord(d, scale, s, f);
    Taps t;
    cubic_weights(f, t.w);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        t.off[k] = (i64)clamp_index(s - 1 + k, 0, size - 1) * stride;
        t.iw[k] = __float2int_rn(__fmul_rn(t.w[k], 2048.f));
    }
    constexpr int lanes = is_integer<T>::value ? 8 : 4;
    const i64 body_end = row_elems / lanes * lanes;
    const i64 e0 = (i64)d * CN;
    t.body = (int)(body_end <= e0 ? 0 : (body_end - e0 >= CN ? CN : body_end - e0));
    return t;
}

template <typename T, int CN, int INTERP>
__device__ __forceinline__ Taps x_taps(int dx, double scale, int sw, i64 s_x, int dw) {
    if constexpr (INTERP == INTERP_NEAREST) return nearest_taps(dx, scale, sw, s_x);
    else if constexpr (INTERP == INTERP_LINEAR) return linear_taps(dx, scale, sw, s_x, true);
    else return cubic_taps<T, CN>(dx, scale, sw, s_x, (i64)dw * CN);
}

template <typename T, int CN, int INTERP>
__device__ __forceinline__ Taps y_taps(int dy, double scale, int sh, i64 s_y) {
    if constexpr (INTERP == INTERP_NEAREST) return nearest_taps(dy, scale, sh, s_y);
    else if constexpr (INTERP == INTERP_LINEAR) return linear_taps(dy, scale, sh, s_y, false);
    else return cubic_taps<T, 1>(dy, scale, sh, s_y, 0);
}

// Linear blend, as OpenCV computes it. uint8 reproduces its fixed point bit for bit: a
// horizontal pass in int32, then the vertical pass as its SIMD path computes it,
// ((S0 >> 4) * b0 >> 16) + ((S1 >> 4) * b1 >> 16), then (t + 2) >> 2, saturated. Other
// types: float32 in OpenCV's order (two products, then the sum), never contracted to FMA,
// rounded to nearest on store.
template <typename T, int CN>
__device__ __forceinline__ void linear_blend(const T* __restrict__ img, i64 s_c, const Taps& tx,
                                             const Taps& ty, T (&out)[CN]) {
    const T* r0 = img + ty.off[0];
    const T* r1 = img + ty.off[1];
#pragma unroll
    for (int c = 0; c < CN; ++c) {
        const i64 o = c * s_c;
        const T p00 = r0[tx.off[0] + o], p01 = r0[tx.off[1] + o];
        const T p10 = r1[tx.off[0] + o], p11 = r1[tx.off[1] + o];
        if constexpr (sizeof(T) == 1) {
            const int S0 = (int)p00 * tx.iw[0] + (int)p01 * tx.iw[1];
            const int S1 = (int)p10 * tx.iw[0] + (int)p11 * tx.iw[1];
            const int t = (((S0 >> 4) * ty.iw[0]) >> 16) + (((S1 >> 4) * ty.iw[1]) >> 16);
            out[c] = saturate_u8((t + 2) >> 2);
        } else {
            const float S0 = __fadd_rn(__fmul_rn(to_float(p00), tx.w[0]),
                                       __fmul_rn(to_float(p01), tx.w[1]));
            const float S1 = __fadd_rn(__fmul_rn(to_float(p10), tx.w[0]),
                                       __fmul_rn(to_float(p11), tx.w[1]));
            out[c] = from_float<T>(__fadd_rn(__fmul_rn(S0, ty.w[0]), __fmul_rn(S1, ty.w[1])));
        }
    }
}

// INTER_CUBIC (Keys, A = -0.75) on a 4x4 neighbourhood, replicate border.
// Unlike linear, neither the taps' weights nor sx / sy change at the edges; only the tap
// indices are clamped.
//
// OpenCV computes a horizontal pass per source row, then a vertical pass whose arithmetic
// differs between its SIMD body and its scalar tail. Which one an element takes depends
// only on its index e = dx * CN + c in the destination row: the body covers the first
// (dw * CN / L) * L elements (L = 8 lanes for uint8 / uint16, 4 for float32), so the split
// is reproduced per element. CN is the channel count OpenCV sees (1 for planes).
//   uint8: weights rint(w * 2048); horizontal sums in int32; body: float32
//          h0*b0 + (h1*b1 + (h2*b2 + h3*b3)) with b = weight * 2^-22, rounded; tail: int32
//          (sum h*weight + 2^21) >> 22. Both saturate.
//   others: float32, horizontal ((p0*a0 + p1*a1) + p2*a2) + p3*a3; vertical in the body's
//          order h0*b0 + (h1*b1 + (h2*b2 + h3*b3)), in the tail's ((h0*b0 + h1*b1) + h2*b2)
//          + h3*b3; rounded to nearest on store. float16 is OpenCV's float32 resize rounded.
template <typename T, int CN>
__device__ __forceinline__ void cubic_blend(const T* __restrict__ img, i64 s_c, const Taps& tx,
                                            const Taps& ty, T (&out)[CN]) {
#pragma unroll
    for (int c = 0; c < CN; ++c) {
        const i64 o = c * s_c;
        const bool body = c < tx.body;
        if constexpr (sizeof(T) == 1) {
            int h[4];
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const T* r = img + ty.off[k] + o;
                h[k] = (int)r[tx.off[0]] * tx.iw[0] + (int)r[tx.off[1]] * tx.iw[1] +
                       (int)r[tx.off[2]] * tx.iw[2] + (int)r[tx.off[3]] * tx.iw[3];
            }
            if (body) {
                float acc = __fmul_rn((float)h[3], __fmul_rn((float)ty.iw[3], 1.f / 4194304.f));
#pragma unroll
                for (int k = 2; k >= 0; --k)
                    acc = __fadd_rn(
                        __fmul_rn((float)h[k], __fmul_rn((float)ty.iw[k], 1.f / 4194304.f)), acc);
                out[c] = from_float<T>(acc);
            } else {
                const int sum = h[0] * ty.iw[0] + h[1] * ty.iw[1] + h[2] * ty.iw[2] + h[3] * ty.iw[3];
                out[c] = saturate_u8((sum + (1 << 21)) >> 22);
            }
        } else {
            float h[4];
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const T* r = img + ty.off[k] + o;
                float v = __fmul_rn(to_float(r[tx.off[0]]), tx.w[0]);
#pragma unroll
                for (int j = 1; j < 4; ++j) v = __fadd_rn(v, __fmul_rn(to_float(r[tx.off[j]]), tx.w[j]));
                h[k] = v;
            }
            float acc;
            if (body) {
                acc = __fmul_rn(h[3], ty.w[3]);
#pragma unroll
                for (int k = 2; k >= 0; --k) acc = __fadd_rn(__fmul_rn(h[k], ty.w[k]), acc);
            } else {
                acc = __fmul_rn(h[0], ty.w[0]);
#pragma unroll
                for (int k = 1; k < 4; ++k) acc = __fadd_rn(acc, __fmul_rn(h[k], ty.w[k]));
            }
            out[c] = from_float<T>(acc);
        }
    }
}

template <typename T, int CN, int INTERP>
__device__ __forceinline__ void blend(const T* __restrict__ img, i64 s_c, const Taps& tx,
                                      const Taps& ty, T (&out)[CN]) {
    if constexpr (INTERP == INTERP_NEAREST) {
        const T* p = img + ty.off[0] + tx.off[0];
#pragma unroll
        for (int c = 0; c < CN; ++c) out[c] = p[c * s_c];
    } else if constexpr (INTERP == INTERP_LINEAR) {
        linear_blend<T, CN>(img, s_c, tx, ty, out);
    } else {
        cubic_blend<T, CN>(img, s_c, tx, ty, out);
    }
}

// The mean of a 2x2 cell at (2 dy, 2 dx), as OpenCV's INTER_AREA fast path computes it
// (cv2.resize also takes this path for INTER_LINEAR at an exact factor of 2 on both axes).
// PIXEL_CN is the channel count of the pixel OpenCV sees: CN, or for one plane of a pixel
// of more than 4 channels any count above 4 (OpenCV picks its path by that count, not by
// the CN a thread computes):
//   integers with PIXEL_CN 1, 3 or 4: (a + b + c + d + 2) >> 2 (its vector path, ties up);
//   floats with PIXEL_CN 1 or 4, element e = dx * CN + c inside the vector body
//          (e < (row_cells * CN / 4) * 4): ((a + b) + (c + d)) * 0.25;
//   otherwise its general loop over (a, b, c, d): uint8 an int32 sum, uint16 a float32 sum
//          of the four, floats ((a + b) + c) + d; times 0.25, rounded to nearest (ties to
//          even).
template <typename T, int CN, int PIXEL_CN = CN>
__device__ __forceinline__ void sample_area_2x2(const T* __restrict__ img, i64 s_y, i64 s_x,
                                                i64 s_c, int dy, int dx, int row_cells,
                                                T (&out)[CN]) {
    const T* cell = img + (i64)(2 * dy) * s_y + (i64)(2 * dx) * s_x;
    const i64 body_end = (i64)row_cells * CN / 4 * 4;
#pragma unroll
    for (int c = 0; c < CN; ++c) {
        const T* p = cell + c * s_c;
        const T a = p[0], b = p[s_x], d0 = p[s_y], d1 = p[s_y + s_x];
        if constexpr (is_integer<T>::value) {
            const int sum = (int)a + (int)b + (int)d0 + (int)d1;
            if (PIXEL_CN == 1 || PIXEL_CN == 3 || PIXEL_CN == 4)
                out[c] = (T)((sum + 2) >> 2);
            else
                out[c] = from_float<T>(__fmul_rn((float)sum, 0.25f));
        } else {
            const float fa = to_float(a), fb = to_float(b), fc = to_float(d0), fd = to_float(d1);
            float sum;
            if ((PIXEL_CN == 1 || PIXEL_CN == 4) && (i64)dx * CN + c < body_end)
                sum = __fadd_rn(__fadd_rn(fa, fb), __fadd_rn(fc, fd));
            else
                sum = __fadd_rn(__fadd_rn(__fadd_rn(fa, fb), fc), fd);
            out[c] = from_float<T>(__fmul_rn(sum, 0.25f));
        }
    }
}

// The mean of a cell cut by the image's edge, rows [y0, y0 + isy) and columns
// [x0, x0 + isx) clipped to the image: OpenCV's area fast path averages what it has,
// float(sum) / count (uint8 summed in int32, others in float32 in row order).
template <typename T, int CN>
__device__ __forceinline__ void sample_area_partial(const T* __restrict__ img, i64 s_y, i64 s_x,
                                                    i64 s_c, int sh, int sw, int y0, int x0,
                                                    int isy, int isx, T (&out)[CN]) {
    const int ny = min(isy, sh - y0), nx = min(isx, sw - x0);
    const T* cell = img + (i64)y0 * s_y + (i64)x0 * s_x;
#pragma unroll
    for (int c = 0; c < CN; ++c) {
        const T* p = cell + c * s_c;
        if constexpr (sizeof(T) == 1) {
            int sum = 0;
            for (int y = 0; y < ny; ++y)
                for (int x = 0; x < nx; ++x) sum += p[y * s_y + (i64)x * s_x];
            out[c] = from_float<T>(__fdiv_rn((float)sum, (float)(nx * ny)));
        } else {
            float sum = 0.f;
            for (int y = 0; y < ny; ++y)
                for (int x = 0; x < nx; ++x) sum = __fadd_rn(sum, to_float(p[y * s_y + (i64)x * s_x]));
            out[c] = from_float<T>(__fdiv_rn(sum, (float)(nx * ny)));
        }
    }
}

// cv2.resize runs INTER_LINEAR at an exact factor of 2 on both axes as INTER_AREA's cell
// mean (|scale - 2| < DBL_EPSILON, that is scale == 2 exactly); sizes from cv2compat's
// fx = fy = 0.5 can leave a last row / column of cut cells.
template <typename T, int CN, int PIXEL_CN = CN>
__device__ __forceinline__ void sample_linear_2x(const T* __restrict__ img, i64 s_y, i64 s_x,
                                                 i64 s_c, int sh, int sw, int dy, int dx,
                                                 T (&out)[CN]) {
    const int row_cells = 2 * dy + 2 <= sh ? sw / 2 : 0;
    if (dx < row_cells)
        sample_area_2x2<T, CN, PIXEL_CN>(img, s_y, s_x, s_c, dy, dx, row_cells, out);
    else
        sample_area_partial<T, CN>(img, s_y, s_x, s_c, sh, sw, 2 * dy, 2 * dx, 2, 2, out);
}

// INTER_AREA, fast regime: both scales within DBL_EPSILON of integers isx, isy >= 1.
// Destination pixel (dy, dx) is the mean of its isy x isx cell, summed in OpenCV's order
// (row by row):
//   integers 2x2 with PIXEL_CN 1, 3 or 4: (a + b + c + d + 2) >> 2 (OpenCV's vector path;
//          2-channel and wider pixels take the general path, which rounds ties to even);
//   uint8: exact int32 sum, then rint(float(sum) * inv_area); uint16 the same, but
//          summed in float32 four elements at a time (OpenCV's accumulator type for it);
//   floats: sum = sum + (((t0 + t1) + t2) + t3) per four, then one at a time, times
//          inv_area; 2x2 with CN 1 or 4 in the SIMD body (element index below the body's
//          end, as cubic) is ((t0 + t1) + (t2 + t3)) * 0.25.
// Cells cut by the image's edge (sizes from cv2compat's fx / fy only) average what they
// have: float(sum) / count. The caller works out, once, whole_cells = sw / isx and
// inv_area = 1 / (isx * isy) rounded to float.
template <typename T, int CN, int PIXEL_CN = CN>
__device__ __forceinline__ void sample_area_fast(const T* __restrict__ img, i64 s_y, i64 s_x,
                                                 i64 s_c, int sh, int sw, int dy, int dx,
                                                 int isy, int isx, int whole_cells,
                                                 float inv_area, T (&out)[CN]) {
    if (isx == 2 && isy == 2) {
        sample_linear_2x<T, CN, PIXEL_CN>(img, s_y, s_x, s_c, sh, sw, dy, dx, out);
        return;
    }
    const int sy0 = dy * isy, sx0 = dx * isx;
    // OpenCV's vector body and whole-cell loop end where this row's whole cells end
    if (dx >= (sy0 + isy <= sh ? whole_cells : 0)) {
        sample_area_partial<T, CN>(img, s_y, s_x, s_c, sh, sw, sy0, sx0, isy, isx, out);
        return;
    }
    const T* cell = img + (i64)sy0 * s_y + (i64)sx0 * s_x;
    if constexpr (sizeof(T) == 1) {
        // an exact int32 sum in any order: a row's pixels four at a time (predicated),
        // every channel of a pixel together, so a thread has up to 4 * CN independent
        // loads in flight instead of one element after another
        int sum[CN] = {};
        for (int cy = 0; cy < isy; ++cy) {
            const T* r = cell + (i64)cy * s_y;
            for (int cx = 0; cx < isx; cx += 4) {
#pragma unroll
                for (int u = 0; u < 4; ++u) {
                    if (cx + u < isx) {
#pragma unroll
                        for (int c = 0; c < CN; ++c) sum[c] += r[(i64)(cx + u) * s_x + c * s_c];
                    }
                }
            }
        }
#pragma unroll
        for (int c = 0; c < CN; ++c) out[c] = from_float<T>(__fmul_rn((float)sum[c], inv_area));
        return;
    }
    const int area = isx * isy;
#pragma unroll
    for (int c = 0; c < CN; ++c) {
        const T* p = cell + c * s_c;
        // the cell's elements in OpenCV's order, four at a time, then the rest
        int cy = 0, cx = 0;
        auto next = [&]() {
            const T v = p[cy * s_y + (i64)cx * s_x];
            if (++cx == isx) {
                cx = 0;
                ++cy;
            }
            return v;
        };
        float sum = 0.f;
        int k = 0;
        if constexpr (is_integer<T>::value) {
            for (; k + 4 <= area; k += 4) {
                const int t0 = next(), t1 = next(), t2 = next(), t3 = next();
                sum = __fadd_rn(sum, (float)(t0 + t1 + t2 + t3));
            }
            for (; k < area; ++k) sum = __fadd_rn(sum, (float)next());
        } else {
            for (; k + 4 <= area; k += 4) {
                const float t0 = to_float(next()), t1 = to_float(next());
                const float t2 = to_float(next()), t3 = to_float(next());
                sum = __fadd_rn(sum, __fadd_rn(__fadd_rn(__fadd_rn(t0, t1), t2), t3));
            }
            for (; k < area; ++k) sum = __fadd_rn(sum, to_float(next()));
        }
        out[c] = from_float<T>(__fmul_rn(sum, inv_area));
    }
}

// A byte v under the exponent byte 0x4B is the float 2^23 + v: bytes become floats without
// a conversion instruction (v itself is that float less 2^23, exactly).
constexpr float kTwo23 = 8388608.f;
constexpr unsigned kTwo23Bits = 0x4B000000u;

// An image's first byte as byte windows address it: the 32-bit word holding it (`words`)
// and its place in that word (`mis`).
struct WordBase {
    const unsigned* words;
    unsigned mis;
};

__device__ __forceinline__ WordBase word_base(const void* first) {
    const unsigned long long base = (unsigned long long)first;
    return {reinterpret_cast<const unsigned*>(base & ~3ull), (unsigned)(base & 3u)};
}

// Whether byte offsets into an image of h rows of w pixels of CN bytes (row stride s_y
// bytes), up to `reach` bytes past its last pixel's first, fit in int32.
template <int CN>
__device__ __forceinline__ bool byte_offsets_fit(int h, int w, i64 s_y, int reach) {
    return (i64)(h - 1) * (s_y < 0 ? -s_y : s_y) + (i64)w * CN + reach < 2147483647LL;
}

// Byte windows: the bytes [off, off + USED) counted from `words` (USED <= 8; off a signed
// 32-bit byte offset) as the low bytes of two words, from the aligned 32-bit words that
// cover them. window_words loads those words (`load` false: none, all zero; a predicate,
// not a branch, so a caller can issue many windows' loads before it waits for any);
// window_bytes shifts them into place. The words read hold the bytes
// [off - 3, off + max(8, USED + 3)).
template <int USED>
__device__ __forceinline__ void window_words(const unsigned* words, unsigned off, bool load,
                                             unsigned (&w)[3]) {
    const unsigned* p = words + ((int)off >> 2);
    w[0] = load ? __ldg(p) : 0u;
    w[1] = load ? __ldg(p + 1) : 0u;
    // the third word only where the bytes used reach it (lanes that skip it touch no
    // cache sector); the window's bytes past USED are then zero
    w[2] = load && (off & 3u) > 8u - USED ? __ldg(p + 2) : 0u;
}

__device__ __forceinline__ void window_bytes(const unsigned (&w)[3], unsigned off,
                                             unsigned& lo, unsigned& hi) {
    const unsigned shift = off << 3;  // funnel shifts take it modulo 32
    lo = __funnelshift_r(w[0], w[1], shift);
    hi = __funnelshift_r(w[1], w[2], shift);
}

template <int USED>
__device__ __forceinline__ void window8(const unsigned* words, unsigned off, unsigned& lo,
                                        unsigned& hi) {
    unsigned w[3];
    window_words<USED>(words, off, true, w);
    window_bytes(w, off, lo, hi);
}

// One destination pixel (dy, dx) of a dh x dw resize (dh is not needed); PIXEL_CN as in
// sample_area_2x2.
template <typename T, int CN, int INTERP, int PIXEL_CN = CN>
__device__ __forceinline__ void sample(const T* __restrict__ img, i64 s_y, i64 s_x, i64 s_c,
                                       int sh, int sw, int dw, int dy, int dx, double scale_y,
                                       double scale_x, T (&out)[CN]) {
    if (INTERP == INTERP_LINEAR && scale_y == 2.0 && scale_x == 2.0) {
        sample_linear_2x<T, CN, PIXEL_CN>(img, s_y, s_x, s_c, sh, sw, dy, dx, out);
        return;
    }
    const Taps tx = x_taps<T, CN, INTERP>(dx, scale_x, sw, s_x, dw);
    const Taps ty = y_taps<T, CN, INTERP>(dy, scale_y, sh, s_y);
    blend<T, CN, INTERP>(img, s_c, tx, ty, out);
}

}  // namespace cp
