// Fused batch preprocessing: resize (cv2.resize semantics) + placement on a padded canvas
// (letterbox, crop) + channel order + (x * scale - mean) / std + layout + output dtype, one
// launch for a whole batch.
//
// cupyprep_preprocess_<interpolation><TIn, TOut, CN, SWAP_RB, RAGGED>
//
// Each image n is resized to (nh, nw) and placed with its top-left corner at
// (off_y, off_x) on the (H, W) output canvas (negative offsets crop); canvas pixels that
// the image does not cover take the pad value. A resized pixel is rounded to TIn before it
// is normalized, exactly as cv2.resize followed by a normalization gives it.
//
// RAGGED = false: one NHWC batch, image n at base + n * s_n, one geometry for all.
// RAGGED = true: per-image tables: ptrs[n] (device pointers), geom[n] = {h0, w0, nh, nw,
// off_y, off_x}, strides[n] = {s_y, s_x, s_c}, scales[n] = {scale_y, scale_x}.
#include "sampling.cuh"

namespace {

// INTERP: 0 nearest, 1 linear, 2 cubic. rw is the resized width (cubic's OpenCV row).
template <typename TIn, int CN, int INTERP>
__device__ __forceinline__ void sample(const TIn* img, cp::i64 s_y, cp::i64 s_x, cp::i64 s_c,
                                       int sh, int sw, int dy, int dx, double scale_y,
                                       double scale_x, int rw, TIn (&out)[CN]) {
    if constexpr (INTERP == 0)
        cp::sample_nearest<TIn, CN>(img, s_y, s_x, s_c, sh, sw, dy, dx, scale_y, scale_x, out);
    else if constexpr (INTERP == 1)
        cp::sample_linear<TIn, CN>(img, s_y, s_x, s_c, sh, sw, dy, dx, scale_y, scale_x, out);
    else
        cp::sample_cubic<TIn, CN>(img, s_y, s_x, s_c, sh, sw, dy, dx, scale_y, scale_x,
                                  (cp::i64)rw * CN, out);
}

}  // namespace

#define CUPYPREP_PREPROCESS_PARAMS                                                        \
    const TIn* __restrict__ base, const unsigned long long* __restrict__ ptrs,            \
        const int* __restrict__ geom, const cp::i64* __restrict__ strides,                \
        const double* __restrict__ scales, cp::i64 s_n, int h0, int w0, int nh, int nw,    \
        int off_y, int off_x, cp::i64 s_y, cp::i64 s_x, cp::i64 s_c, double scale_y,       \
        double scale_x, TOut* __restrict__ dst, int H, int W, cp::i64 d_n, cp::i64 d_y,    \
        cp::i64 d_x, cp::i64 d_c, float scale, float m0, float m1, float m2, float m3,     \
        float sd0, float sd1, float sd2, float sd3, float p0, float p1, float p2, float p3, \
        cp::i64 total

#define CUPYPREP_PREPROCESS_ARGS                                                          \
    base, ptrs, geom, strides, scales, s_n, h0, w0, nh, nw, off_y, off_x, s_y, s_x, s_c,   \
        scale_y, scale_x, dst, H, W, d_n, d_y, d_x, d_c, scale, m0, m1, m2, m3, sd0, sd1,  \
        sd2, sd3, p0, p1, p2, p3, total

template <typename TIn, typename TOut, int CN, bool SWAP_RB, bool RAGGED, int INTERP>
__device__ __forceinline__ void preprocess_body(CUPYPREP_PREPROCESS_PARAMS) {
    const float mean[4] = {m0, m1, m2, m3};
    const float sd[4] = {sd0, sd1, sd2, sd3};
    const float pad[4] = {p0, p1, p2, p3};
    const cp::i64 stride = (cp::i64)blockDim.x * gridDim.x;
    for (cp::i64 i = (cp::i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const int x = (int)(i % W);
        const cp::i64 r = i / W;
        const int y = (int)(r % H);
        const cp::i64 n = r / H;
        const TIn* img;
        int ih = h0, iw = w0, rh = nh, rw = nw, oy = off_y, ox = off_x;
        cp::i64 sy_ = s_y, sx_ = s_x, sc_ = s_c;
        double ky = scale_y, kx = scale_x;
        if constexpr (RAGGED) {
            img = reinterpret_cast<const TIn*>(ptrs[n]);
            const int* g = geom + n * 6;
            ih = g[0]; iw = g[1]; rh = g[2]; rw = g[3]; oy = g[4]; ox = g[5];
            const cp::i64* st = strides + n * 3;
            sy_ = st[0]; sx_ = st[1]; sc_ = st[2];
            ky = scales[n * 2]; kx = scales[n * 2 + 1];
        } else {
            img = base + n * s_n;
        }
        const int ry = y - oy, rx = x - ox;
        float v[CN];
        if (ry >= 0 && ry < rh && rx >= 0 && rx < rw) {
            TIn t[CN];
            sample<TIn, CN, INTERP>(img, sy_, sx_, sc_, ih, iw, ry, rx, ky, kx, rw, t);
#pragma unroll
            for (int c = 0; c < CN; ++c) v[c] = cp::to_float(t[c]);
        } else {
#pragma unroll
            for (int c = 0; c < CN; ++c) v[c] = pad[c];
        }
        TOut* q = dst + n * d_n + y * d_y + (cp::i64)x * d_x;
#pragma unroll
        for (int c = 0; c < CN; ++c) {
            const int k = (SWAP_RB && CN >= 3 && c < 3) ? 2 - c : c;
            const float o = __fdiv_rn(__fsub_rn(__fmul_rn(v[k], scale), mean[c]), sd[c]);
            q[c * d_c] = cp::from_float<TOut>(o);
        }
    }
}

template <typename TIn, typename TOut, int CN, bool SWAP_RB, bool RAGGED>
__global__ void cupyprep_preprocess_nearest(CUPYPREP_PREPROCESS_PARAMS) {
    preprocess_body<TIn, TOut, CN, SWAP_RB, RAGGED, 0>(CUPYPREP_PREPROCESS_ARGS);
}

template <typename TIn, typename TOut, int CN, bool SWAP_RB, bool RAGGED>
__global__ void cupyprep_preprocess_linear(CUPYPREP_PREPROCESS_PARAMS) {
    preprocess_body<TIn, TOut, CN, SWAP_RB, RAGGED, 1>(CUPYPREP_PREPROCESS_ARGS);
}

template <typename TIn, typename TOut, int CN, bool SWAP_RB, bool RAGGED>
__global__ void cupyprep_preprocess_cubic(CUPYPREP_PREPROCESS_PARAMS) {
    preprocess_body<TIn, TOut, CN, SWAP_RB, RAGGED, 2>(CUPYPREP_PREPROCESS_ARGS);
}
