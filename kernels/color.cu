// Color conversions with cv2.cvtColor semantics.
#include "color.cuh"

// BGR <-> RGB (BGRA <-> RGBA keeps alpha in place): reverse the first three channels.
template <typename T, int CN>
__global__ void cupyprep_swap_rb(const T* __restrict__ src, T* __restrict__ dst, int h, int w,
                                 cp::i64 s_n, cp::i64 s_y, cp::i64 s_x, cp::i64 s_c,
                                 cp::i64 d_n, cp::i64 d_y, cp::i64 d_x, cp::i64 d_c,
                                 cp::i64 total) {
    const cp::i64 stride = (cp::i64)blockDim.x * gridDim.x;
    for (cp::i64 i = (cp::i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const cp::pixel px = cp::unflatten_pixel(i, h, w);
        const T* p = src + cp::pixel_offset(px, s_n, s_y, s_x);
        T* q = dst + cp::pixel_offset(px, d_n, d_y, d_x);
        T v[CN];
#pragma unroll
        for (int c = 0; c < CN; ++c) v[c] = p[c * s_c];
#pragma unroll
        for (int c = 0; c < CN; ++c) q[c * d_c] = v[c < 3 ? 2 - c : c];
    }
}

// To gray, BIDX = index of blue (0: BGR, 2: RGB); a fourth (alpha) channel is ignored.
// Integers: OpenCV's fixed point, Y = (B*3735 + G*19235 + R*9798 + 2^14) >> 15.
// Floats: B*0.114 + G*0.587 + R*0.299 in float32, in channel order, not contracted.
template <typename T, int SCN, int BIDX>
__global__ void cupyprep_to_gray(const T* __restrict__ src, T* __restrict__ dst, int h, int w,
                                 cp::i64 s_n, cp::i64 s_y, cp::i64 s_x, cp::i64 s_c,
                                 cp::i64 d_n, cp::i64 d_y, cp::i64 d_x, cp::i64 total) {
    const cp::i64 stride = (cp::i64)blockDim.x * gridDim.x;
    for (cp::i64 i = (cp::i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const cp::pixel px = cp::unflatten_pixel(i, h, w);
        const T* p = src + cp::pixel_offset(px, s_n, s_y, s_x);
        T* q = dst + cp::pixel_offset(px, d_n, d_y, d_x);
        if constexpr (cp::is_integer<T>::value) {
            const unsigned cw[3] = {BIDX == 0 ? 3735u : 9798u, 19235u, BIDX == 0 ? 9798u : 3735u};
            const unsigned v = (unsigned)p[0] * cw[0] + (unsigned)p[s_c] * cw[1] +
                               (unsigned)p[2 * s_c] * cw[2];
            *q = (T)((v + (1u << 14)) >> 15);
        } else {
            const float cw[3] = {BIDX == 0 ? 0.114f : 0.299f, 0.587f, BIDX == 0 ? 0.299f : 0.114f};
            const float v = __fadd_rn(__fadd_rn(__fmul_rn(cp::to_float(p[0]), cw[0]),
                                                __fmul_rn(cp::to_float(p[s_c]), cw[1])),
                                      __fmul_rn(cp::to_float(p[2 * s_c]), cw[2]));
            *q = cp::from_float<T>(v);
        }
    }
}

// cv2.cvtColor between BGR (or RGB: BIDX = 2) and HSV or YCrCb, for uint8 and float32
// (color.cuh has the arithmetic). CONV: 0 BGR -> HSV, 1 HSV -> BGR, 2 BGR -> YCrCb,
// 3 YCrCb -> BGR. SCN: source channels (a fourth, alpha, is ignored); the output has 3.
// hrange: H's range (uint8: 180, 256 for BGR -> HSV _FULL, 255 for HSV -> BGR _FULL; float
// 360). vector_block: HSV -> BGR uint8 converts a row's first (w / block) * block pixels
// as OpenCV's vector code does and the rest as its scalar code (color.cuh).
template <typename T, int CONV, int SCN, int BIDX>
__global__ void cupyprep_cvt_color(const T* __restrict__ src, T* __restrict__ dst, int h, int w,
                                   cp::i64 s_n, cp::i64 s_y, cp::i64 s_x, cp::i64 s_c,
                                   cp::i64 d_n, cp::i64 d_y, cp::i64 d_x, cp::i64 d_c,
                                   int hrange, int vector_block, cp::i64 total) {
    namespace cc = cp::color;
    const int vector_end = vector_block > 0 ? w / vector_block * vector_block : 0;
    const cp::i64 stride = (cp::i64)blockDim.x * gridDim.x;
    for (cp::i64 i = (cp::i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const cp::pixel px = cp::unflatten_pixel(i, h, w);
        const T* p = src + cp::pixel_offset(px, s_n, s_y, s_x);
        T* q = dst + cp::pixel_offset(px, d_n, d_y, d_x);
        const T a0 = p[0], a1 = p[s_c], a2 = p[2 * s_c];
        // BGR order of a 3-channel color (CONV 0, 2 read it; CONV 1, 3 write it)
        const T b = BIDX == 0 ? a0 : a2, r = BIDX == 0 ? a2 : a0;
        T o[3];
        if constexpr (cp::is_integer<T>::value) {
            int v[3];
            if constexpr (CONV == 0) cc::hsv_from_bgr_u8(b, a1, r, hrange, v);
            if constexpr (CONV == 1) cc::bgr_from_hsv_u8(a0, a1, a2, hrange, px.x < vector_end, v);
            if constexpr (CONV == 2) cc::ycrcb_from_bgr_u8(b, a1, r, v);
            if constexpr (CONV == 3) cc::bgr_from_ycrcb_u8(a0, a1, a2, v);
#pragma unroll
            for (int c = 0; c < 3; ++c) o[c] = (T)v[c];
        } else {
            float v[3];
            if constexpr (CONV == 0) cc::hsv_from_bgr_f32(b, a1, r, v);
            if constexpr (CONV == 1) cc::bgr_from_hsv_f32(a0, a1, a2, v);
            if constexpr (CONV == 2)
                cc::ycrcb_from_bgr_f32(a0, a1, a2, BIDX == 0 ? 0.114f : 0.299f,
                                       BIDX == 0 ? 0.299f : 0.114f, b, r, v);
            if constexpr (CONV == 3) cc::bgr_from_ycrcb_f32(a0, a1, a2, v);
#pragma unroll
            for (int c = 0; c < 3; ++c) o[c] = v[c];
        }
        if constexpr (CONV == 1 || CONV == 3) {  // BGR out: RGB reverses it
            q[0] = o[BIDX == 0 ? 0 : 2];
            q[d_c] = o[1];
            q[2 * d_c] = o[BIDX == 0 ? 2 : 0];
        } else {
            q[0] = o[0];
            q[d_c] = o[1];
            q[2 * d_c] = o[2];
        }
    }
}
