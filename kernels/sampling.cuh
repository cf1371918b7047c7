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

// INTER_LINEAR. Horizontally the fraction is clamped to 0 at the edges (OpenCV clamps sx
// and sets fx = 0 there); vertically only the row indices are clamped and the weights keep
// their fraction, as OpenCV does.
//
// uint8 reproduces OpenCV's fixed point bit for bit: weights rint(w * 2048); a horizontal
// pass in int32; the vertical pass as its SIMD path computes it,
// ((S0 >> 4) * b0 >> 16) + ((S1 >> 4) * b1 >> 16), then (t + 2) >> 2, saturated.
// Other types compute in float32 with OpenCV's operation order (two products, then the
// sum), never contracted to FMA, and round to nearest on store.
template <typename T, int CN>
__device__ __forceinline__ void sample_linear(const T* __restrict__ img, i64 s_y, i64 s_x,
                                              i64 s_c, int sh, int sw, int dy, int dx,
                                              double scale_y, double scale_x, T (&out)[CN]) {
    int sx, sy;
    float fx, fy;
    linear_coord(dx, scale_x, sx, fx);
    linear_coord(dy, scale_y, sy, fy);
    if (sx < 0) { sx = 0; fx = 0.f; }
    if (sx >= sw - 1) { sx = sw - 1; fx = 0.f; }
    const int sx1 = min(sx + 1, sw - 1);
    const T* r0 = img + clamp_index(sy, 0, sh - 1) * s_y;
    const T* r1 = img + clamp_index(sy + 1, 0, sh - 1) * s_y;
    const i64 x0 = (i64)sx * s_x, x1 = (i64)sx1 * s_x;
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

}  // namespace cp
