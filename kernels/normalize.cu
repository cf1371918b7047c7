// Normalize: out[c] = (x[src_c] * scale - mean[c]) * (1 / std[c]), one pass over the image.
//
// cupyprep_normalize<TIn, TOut, CN, SWAP_RB>: channel order (SWAP_RB reverses the first
// three channels: BGR <-> RGB, BGRA -> RGBA), the arithmetic, the layout change (both sides
// are addressed through element strides, so HWC -> CHW is a choice of destination strides)
// and the output dtype (float32, float16, or uint8 rounded half to even and saturated).
// The arithmetic is float32 in exactly this order, never contracted (1 / std is rounded to
// float32 once on the host: a multiply is a fraction of a division's cost), so a float32
// NumPy evaluation of the same formula gives the same bits.
#include "common.cuh"

template <typename TIn, typename TOut, int CN, bool SWAP_RB>
__global__ void cupyprep_normalize(const TIn* __restrict__ src, TOut* __restrict__ dst,
                                   int h, int w, cp::i64 s_n, cp::i64 s_y, cp::i64 s_x,
                                   cp::i64 s_c, cp::i64 d_n, cp::i64 d_y, cp::i64 d_x,
                                   cp::i64 d_c, float scale, float m0, float m1, float m2,
                                   float m3, float sd0, float sd1, float sd2, float sd3,
                                   cp::i64 total) {
    const float mean[4] = {m0, m1, m2, m3};
    const float inv_std[4] = {sd0, sd1, sd2, sd3};  // 1 / std, rounded once on the host
    const cp::i64 stride = (cp::i64)blockDim.x * gridDim.x;
    for (cp::i64 i = (cp::i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const cp::pixel px = cp::unflatten_pixel(i, h, w);
        const TIn* p = src + cp::pixel_offset(px, s_n, s_y, s_x);
        TOut* q = dst + cp::pixel_offset(px, d_n, d_y, d_x);
        float v[CN];
#pragma unroll
        for (int c = 0; c < CN; ++c) v[c] = cp::to_float(p[c * s_c]);
        cp::store_normalized<TOut, CN>(q, d_c, v, SWAP_RB, scale, mean, inv_std);
    }
}

// cupyprep_normalize_dense<TIn, TOut, CN, SWAP_RB, NHWC>: the same arithmetic where every
// image's pixels are contiguous (s_c = 1, s_x = CN, s_y = w * CN) and so are the output's
// (planes: d_x = 1, d_y = w; NHWC: d_c = 1, d_x = CN, d_y = w * CN), fewer than 2^30
// elements an image (a pixel index plus the grid's stride stays in int32). A thread takes
// pixels of one image (blockIdx.z) by their index there, neighbors in neighboring lanes, so
// a warp's loads and each plane's stores are contiguous runs, with no per-pixel division by
// the width (which the pixel kernel's strides need). An NHWC pixel that cp::pixel_store
// takes goes as one store where the image's output is aligned to the pixel's size.
template <typename TIn, typename TOut, int CN, bool SWAP_RB, bool NHWC>
__global__ void cupyprep_normalize_dense(const TIn* __restrict__ src, TOut* __restrict__ dst,
                                         int hw, int n_images, cp::i64 s_n, cp::i64 d_n,
                                         cp::i64 d_c, float scale, float m0, float m1,
                                         float m2, float m3, float sd0, float sd1, float sd2,
                                         float sd3) {
    const float mean[4] = {m0, m1, m2, m3};
    const float inv_std[4] = {sd0, sd1, sd2, sd3};
    const int stride = blockDim.x * gridDim.x;
    for (int n = blockIdx.z; n < n_images; n += gridDim.z) {
        const TIn* in = src + n * s_n;
        TOut* out = dst + n * d_n;
        const bool whole = cp::pixel_store<TOut, CN>::value &&  // aligned to one pixel store
                           ((unsigned long long)out & (CN * sizeof(TOut) - 1)) == 0;
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < hw; i += stride) {
            if constexpr (NHWC && cp::pixel_store<TOut, CN>::value) {
                if (whole) {
                    float e[CN];
#pragma unroll
                    for (int c = 0; c < CN; ++c)
                        e[c] = cp::normalized_channel<CN>(cp::source_pixel<TIn>{in, i * CN}, c,
                                                          SWAP_RB, scale, mean, inv_std);
                    cp::store_pixel<TOut, CN>(out + i * CN, e);
                    continue;
                }
            }
#pragma unroll
            for (int c = 0; c < CN; ++c)
                out[NHWC ? i * CN + c : c * d_c + i] =
                    cp::from_float<TOut>(cp::normalized_channel<CN>(
                        cp::source_pixel<TIn>{in, i * CN}, c, SWAP_RB, scale, mean, inv_std));
        }
    }
}
