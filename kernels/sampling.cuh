// Resampling of one destination pixel with cv2.resize semantics, shared by resize.cu and
// preprocess.cu so both give the same bits. Each sampler reads an image addressed by
// element strides (s_y, s_x, s_c) and writes CN values rounded to the image's own type T,
// exactly what cv2.resize stores.
#pragma once
#include "common.cuh"

namespace cp {

// OpenCV's linear source coordinate: computed in double, rounded to float, split into an
// integer part (floor) and a float fraction.
__device__ __forceinline__ void linear_coord(int d, double scale, int& s, float& f) {
    float fs = (float)((d + 0.5) * scale - 0.5);
    s = __float2int_rd(fs);
    f = __fsub_rn(fs, (float)s);
}

// INTER_NEAREST: s = min(floor(d * scale), size - 1).
template <typename T, int CN>
__device__ __forceinline__ void sample_nearest(const T* __restrict__ img, i64 s_y, i64 s_x,
                                               i64 s_c, int sh, int sw, int dy, int dx,
                                               double scale_y, double scale_x, T (&out)[CN]) {
    const int sy = min(__double2int_rd(dy * scale_y), sh - 1);
    const int sx = min(__double2int_rd(dx * scale_x), sw - 1);
    const T* p = img + sy * s_y + (i64)sx * s_x;
#pragma unroll
    for (int c = 0; c < CN; ++c) out[c] = p[c * s_c];
}

// The blend of two rows at columns x0 / x1 (element offsets) with fractions (fx, fy), as
// OpenCV's linear resize computes it. Horizontally OpenCV clamps the fraction to 0 at the
// edges (the caller does); vertically only row indices are clamped.
//
// uint8 reproduces OpenCV's fixed point bit for bit: weights rint(w * 2048); a horizontal
// pass in int32; the vertical pass as its SIMD path computes it,
// ((S0 >> 4) * b0 >> 16) + ((S1 >> 4) * b1 >> 16), then (t + 2) >> 2, saturated.
// Other types compute in float32 with OpenCV's operation order (two products, then the
// sum), never contracted to FMA, and round to nearest on store.
template <typename T, int CN>
__device__ __forceinline__ void linear_blend(const T* r0, const T* r1, i64 x0, i64 x1, i64 s_c,
                                             float fx, float fy, T (&out)[CN]) {
    const float ax0 = __fsub_rn(1.f, fx), ay0 = __fsub_rn(1.f, fy);
    if constexpr (sizeof(T) == 1) {
        const int a0 = __float2int_rn(__fmul_rn(ax0, 2048.f));
        const int a1 = __float2int_rn(__fmul_rn(fx, 2048.f));
        const int b0 = __float2int_rn(__fmul_rn(ay0, 2048.f));
        const int b1 = __float2int_rn(__fmul_rn(fy, 2048.f));
#pragma unroll
        for (int c = 0; c < CN; ++c) {
            const i64 o = c * s_c;
            const int S0 = (int)r0[x0 + o] * a0 + (int)r0[x1 + o] * a1;
            const int S1 = (int)r1[x0 + o] * a0 + (int)r1[x1 + o] * a1;
            const int t = (((S0 >> 4) * b0) >> 16) + (((S1 >> 4) * b1) >> 16);
            out[c] = saturate_u8((t + 2) >> 2);
        }
    } else {
#pragma unroll
        for (int c = 0; c < CN; ++c) {
            const i64 o = c * s_c;
            const float S0 = __fadd_rn(__fmul_rn(to_float(r0[x0 + o]), ax0),
                                       __fmul_rn(to_float(r0[x1 + o]), fx));
            const float S1 = __fadd_rn(__fmul_rn(to_float(r1[x0 + o]), ax0),
                                       __fmul_rn(to_float(r1[x1 + o]), fx));
            out[c] = from_float<T>(__fadd_rn(__fmul_rn(S0, ay0), __fmul_rn(S1, fy)));
        }
    }
}

// The mean of a 2x2 cell at (2 dy, 2 dx), as OpenCV's INTER_AREA fast path computes it
// (cv2.resize also takes this path for INTER_LINEAR at an exact factor of 2 on both axes):
//   integers with CN != 2: (a + b + c + d + 2) >> 2 (its vector path);
//   floats with CN 1 or 4, element e = dx * CN + c inside the vector body
//          (e < (row_cells * CN / 4) * 4): ((a + b) + (c + d)) * 0.25;
//   otherwise its general loop over (a, b, c, d): uint8 an int32 sum, uint16 a float32 sum
//          of the four, floats ((a + b) + c) + d; times 0.25, rounded to nearest.
template <typename T, int CN>
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
            if (CN != 2)
                out[c] = (T)((sum + 2) >> 2);
            else
                out[c] = from_float<T>(__fmul_rn((float)sum, 0.25f));
        } else {
            const float fa = to_float(a), fb = to_float(b), fc = to_float(d0), fd = to_float(d1);
            float sum;
            if ((CN == 1 || CN == 4) && (i64)dx * CN + c < body_end)
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

// INTER_LINEAR, with OpenCV's switch to the area fast path at an exact factor of 2 on
// both axes (scale == 2 exactly: cv2.resize's |scale - 2| < DBL_EPSILON).
template <typename T, int CN>
__device__ __forceinline__ void sample_linear(const T* __restrict__ img, i64 s_y, i64 s_x,
                                              i64 s_c, int sh, int sw, int dy, int dx,
                                              double scale_y, double scale_x, T (&out)[CN]) {
    if (scale_y == 2.0 && scale_x == 2.0) {
        // sizes from cv2compat's fx = fy = 0.5 can leave a last row / column of cut cells
        const int row_cells = 2 * dy + 2 <= sh ? sw / 2 : 0;
        if (dx < row_cells)
            sample_area_2x2<T, CN>(img, s_y, s_x, s_c, dy, dx, row_cells, out);
        else
            sample_area_partial<T, CN>(img, s_y, s_x, s_c, sh, sw, 2 * dy, 2 * dx, 2, 2, out);
        return;
    }
    int sx, sy;
    float fx, fy;
    linear_coord(dx, scale_x, sx, fx);
    linear_coord(dy, scale_y, sy, fy);
    if (sx < 0) { sx = 0; fx = 0.f; }
    if (sx >= sw - 1) { sx = sw - 1; fx = 0.f; }
    const int sx1 = min(sx + 1, sw - 1);
    linear_blend<T, CN>(img + clamp_index(sy, 0, sh - 1) * s_y,
                        img + clamp_index(sy + 1, 0, sh - 1) * s_y, (i64)sx * s_x,
                        (i64)sx1 * s_x, s_c, fx, fy, out);
}

// OpenCV's cubic source coordinate: as linear_coord, with the double product and sum kept
// apart (OpenCV's x86 build has no FMA, and a fused result can round to another float).
__device__ __forceinline__ void cubic_coord(int d, double scale, int& s, float& t) {
    const float fs = (float)__dadd_rn(__dmul_rn(d + 0.5, scale), -0.5);
    s = __float2int_rd(fs);
    t = __fsub_rn(fs, (float)s);
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
// row_elems = dst_w * CN of the image OpenCV resizes (its destination row length).
template <typename T, int CN>
__device__ __forceinline__ void sample_cubic(const T* __restrict__ img, i64 s_y, i64 s_x,
                                             i64 s_c, int sh, int sw, int dy, int dx,
                                             double scale_y, double scale_x, i64 row_elems,
                                             T (&out)[CN]) {
    constexpr int lanes = is_integer<T>::value ? 8 : 4;
    const i64 body_end = row_elems / lanes * lanes;
    int sx, sy;
    float tx, ty, ax[4], ay[4];
    cubic_coord(dx, scale_x, sx, tx);
    cubic_coord(dy, scale_y, sy, ty);
    cubic_weights(tx, ax);
    cubic_weights(ty, ay);
    i64 xo[4];
    const T* rows[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        xo[k] = (i64)clamp_index(sx - 1 + k, 0, sw - 1) * s_x;
        rows[k] = img + clamp_index(sy - 1 + k, 0, sh - 1) * s_y;
    }
    const i64 e0 = (i64)dx * CN;
    if constexpr (sizeof(T) == 1) {
        int ia[4], ib[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            ia[k] = __float2int_rn(__fmul_rn(ax[k], 2048.f));
            ib[k] = __float2int_rn(__fmul_rn(ay[k], 2048.f));
        }
#pragma unroll
        for (int c = 0; c < CN; ++c) {
            const i64 o = c * s_c;
            int h[4];
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const T* r = rows[k] + o;
                h[k] = (int)r[xo[0]] * ia[0] + (int)r[xo[1]] * ia[1] + (int)r[xo[2]] * ia[2] +
                       (int)r[xo[3]] * ia[3];
            }
            if (e0 + c < body_end) {
                float acc = __fmul_rn((float)h[3], __fmul_rn((float)ib[3], 1.f / 4194304.f));
#pragma unroll
                for (int k = 2; k >= 0; --k)
                    acc = __fadd_rn(
                        __fmul_rn((float)h[k], __fmul_rn((float)ib[k], 1.f / 4194304.f)), acc);
                out[c] = from_float<T>(acc);
            } else {
                const int sum = h[0] * ib[0] + h[1] * ib[1] + h[2] * ib[2] + h[3] * ib[3];
                out[c] = saturate_u8((sum + (1 << 21)) >> 22);
            }
        }
    } else {
#pragma unroll
        for (int c = 0; c < CN; ++c) {
            const i64 o = c * s_c;
            float h[4];
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const T* r = rows[k] + o;
                float v = __fmul_rn(to_float(r[xo[0]]), ax[0]);
#pragma unroll
                for (int j = 1; j < 4; ++j) v = __fadd_rn(v, __fmul_rn(to_float(r[xo[j]]), ax[j]));
                h[k] = v;
            }
            float acc;
            if (e0 + c < body_end) {
                acc = __fmul_rn(h[3], ay[3]);
#pragma unroll
                for (int k = 2; k >= 0; --k) acc = __fadd_rn(__fmul_rn(h[k], ay[k]), acc);
            } else {
                acc = __fmul_rn(h[0], ay[0]);
#pragma unroll
                for (int k = 1; k < 4; ++k) acc = __fadd_rn(acc, __fmul_rn(h[k], ay[k]));
            }
            out[c] = from_float<T>(acc);
        }
    }
}

}  // namespace cp
