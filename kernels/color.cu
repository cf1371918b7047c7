// Color conversions with cv2.cvtColor semantics.
#include "common.cuh"

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
