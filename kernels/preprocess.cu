// Fused batch preprocessing: resize (cv2.resize semantics) + placement on a padded canvas
// (letterbox, crop) + channel order + (x * scale - mean) * (1 / std) + layout + dtype, one
// launch for a whole batch.
//
// cupyprep_preprocess_<interpolation><TIn, TOut, CN, DENSE, RAGGED, XPT>
//
// Each image n is resized to (nh, nw) and placed with its top-left corner at
// (off_y, off_x) on the (H, W) output canvas (negative offsets crop); canvas pixels that
// the image does not cover take the pad value. A resized pixel is rounded to TIn before it
// is normalized, exactly as cv2.resize followed by a normalization gives it. `area` is
// INTER_AREA's fast regime (every image's scales integers; the host resizes other area
// factors first and then runs `nearest` at scale 1).
//
// DENSE: every image's pixels are contiguous (s_c = 1, s_x = CN), so addresses fold into
// constants; otherwise any element strides.
// RAGGED = false: one NHWC batch, image n at base + n * s_n, one geometry for all.
// RAGGED = true: a list, image n's source and geometry in records[n] and its plan in
// plans[4n ..] = {nh, nw, off_y, off_x}: up to cp::kImagesByValue of each by value
// (`small`, `small_plans`), or, where `table` is not NULL, N records followed by N plans
// there. The resize step 1 / (nh / h0) is worked out here in double, as the host does it.
#include "sampling.cuh"

// BY_VALUE(type): how the records by value are declared (the kernel's own parameters,
// or references to them in the functions it calls)
#define CUPYPREP_GRID_CONSTANT(...) const __grid_constant__ __VA_ARGS__
#define CUPYPREP_REFERENCE(...) const __VA_ARGS__&
#define CUPYPREP_PREPROCESS_PARAMS(BY_VALUE)                                               \
    const TIn* __restrict__ base, const cp::RaggedImage* __restrict__ table,               \
        BY_VALUE(cp::ByValue<cp::RaggedImage, RAGGED ? cp::kImagesByValue : 1>) small,     \
        BY_VALUE(cp::ByValue<int, RAGGED ? cp::kImagesByValue * 4 : 1>) small_plans, cp::i64 s_n, \
        int h0, int w0, int nh, int nw, int off_y, int off_x, cp::i64 s_y, cp::i64 s_x,    \
        cp::i64 s_c, double scale_y, double scale_x, TOut* __restrict__ dst, int H, int W, \
        cp::i64 d_n, cp::i64 d_y, cp::i64 d_x, cp::i64 d_c, int swap_rb, float scale,      \
        float m0, float m1, float m2, float m3, float sd0, float sd1, float sd2, float sd3, \
        float p0, float p1, float p2, float p3, int N, int rows_per_block

#define CUPYPREP_PREPROCESS_ARGS                                                          \
    base, table, small, small_plans, s_n, h0, w0, nh, nw, off_y, off_x, s_y, s_x, s_c,     \
        scale_y, scale_x, dst, H, W, d_n, d_y, d_x, d_c, swap_rb, scale, m0, m1, m2, m3,   \
        sd0, sd1, sd2, sd3, p0, p1, p2, p3, N, rows_per_block

// Grid: x across blocks and threads, XPT adjacent columns per thread; blockIdx.y a group
// of rows_per_block rows; blockIdx.z an image (loops cover sizes past the grid's limits).
// A thread keeps its columns, so their taps are computed once for all its rows, and each
// row's taps once for its columns.
template <typename TIn, typename TOut, int CN, bool DENSE, bool RAGGED, int INTERP, int XPT>
__device__ __forceinline__ void preprocess_body(CUPYPREP_PREPROCESS_PARAMS(CUPYPREP_REFERENCE)) {
    const float mean[4] = {m0, m1, m2, m3};
    const float inv_std[4] = {sd0, sd1, sd2, sd3};  // 1 / std, rounded once on the host
    const float pad[4] = {p0, p1, p2, p3};
    for (int n = blockIdx.z; n < N; n += gridDim.z) {
        const TIn* img;
        int ih = h0, iw = w0, rh = nh, rw = nw, oy = off_y, ox = off_x;
        cp::i64 sy_ = s_y, sx_ = s_x, sc_ = s_c;
        double ky = scale_y, kx = scale_x;
        if constexpr (RAGGED) {
            const cp::RaggedImage& r = table ? table[n] : small.v[n];
            const int* g = table ? reinterpret_cast<const int*>(table + N) + (cp::i64)n * 4
                                 : small_plans.v + n * 4;
            img = reinterpret_cast<const TIn*>(r.ptr);
            ih = r.h; iw = r.w; sy_ = r.s_y; sx_ = r.s_x; sc_ = r.s_c;
            rh = g[0]; rw = g[1]; oy = g[2]; ox = g[3];
            // OpenCV's step: 1 / (new / old) in double, not old / new
            ky = __ddiv_rn(1.0, __ddiv_rn((double)rh, (double)ih));
            kx = __ddiv_rn(1.0, __ddiv_rn((double)rw, (double)iw));
        } else {
            img = base + (cp::i64)n * s_n;
        }
        if constexpr (DENSE) {
            sx_ = CN;
            sc_ = 1;
        }
        // cv2.resize's exact-factor-2 linear is area's cell mean: per pixel, not per tap
        const bool linear_2x = INTERP == cp::INTERP_LINEAR && ky == 2.0 && kx == 2.0;
        // area (the host launches it for integer factors only): the cell mean per pixel
        int isy = 1, isx = 1, whole_cells = 0;
        float inv_area = 1.f;
        if constexpr (INTERP == cp::INTERP_AREA) {
            isy = __double2int_rn(ky);  // OpenCV's saturate_cast<int>(scale)
            isx = __double2int_rn(kx);
            whole_cells = iw / isx;
            inv_area = __fdiv_rn(1.f, (float)(isx * isy));
        }
        TOut* image_out = dst + (cp::i64)n * d_n;
        for (int x0 = (blockIdx.x * blockDim.x + threadIdx.x) * XPT; x0 < W;
             x0 += gridDim.x * blockDim.x * XPT) {
            cp::Taps tx[XPT];
            bool col_inside[XPT];
#pragma unroll
            for (int j = 0; j < XPT; ++j) {
                const int rx = x0 + j - ox;
                col_inside[j] = x0 + j < W && rx >= 0 && rx < rw;
                if constexpr (INTERP != cp::INTERP_AREA) {
                    if (col_inside[j] && !linear_2x)
                        tx[j] = cp::x_taps<TIn, CN, INTERP>(rx, kx, iw, sx_, rw);
                }
            }
            for (int group = blockIdx.y; group * rows_per_block < H; group += gridDim.y) {
                const int y_end = min(H, (group + 1) * rows_per_block);
                for (int y = group * rows_per_block; y < y_end; ++y) {
                    const int ry = y - oy;
                    const bool row_inside = ry >= 0 && ry < rh;
                    cp::Taps ty;
                    if constexpr (INTERP != cp::INTERP_AREA) {
                        if (row_inside && !linear_2x) ty = cp::y_taps<TIn, CN, INTERP>(ry, ky, ih, sy_);
                    }
                    TOut* q = image_out + (cp::i64)y * d_y + (cp::i64)x0 * d_x;
#pragma unroll
                    for (int j = 0; j < XPT; ++j) {
                        if (x0 + j >= W) break;
                        float v[CN];
                        if (row_inside && col_inside[j]) {
                            TIn t[CN];
                            if constexpr (INTERP == cp::INTERP_AREA)
                                cp::sample_area_fast<TIn, CN>(img, sy_, sx_, sc_, ih, iw, ry,
                                                              x0 + j - ox, isy, isx,
                                                              whole_cells, inv_area, t);
                            else if (linear_2x)
                                cp::sample_linear_2x<TIn, CN>(img, sy_, sx_, sc_, ih, iw, ry,
                                                              x0 + j - ox, t);
                            else
                                cp::blend<TIn, CN, INTERP>(img, sc_, tx[j], ty, t);
#pragma unroll
                            for (int c = 0; c < CN; ++c) v[c] = cp::to_float(t[c]);
                        } else {
#pragma unroll
                            for (int c = 0; c < CN; ++c) v[c] = pad[c];
                        }
                        cp::store_normalized<TOut, CN>(q + j * d_x, d_c, v, swap_rb, scale,
                                                       mean, inv_std);
                    }
                }
            }
        }
    }
}

#define CUPYPREP_PREPROCESS_KERNEL(NAME, INTERP)                                           \
    template <typename TIn, typename TOut, int CN, bool DENSE, bool RAGGED, int XPT>      \
    __global__ void cupyprep_preprocess_##NAME(                                           \
        CUPYPREP_PREPROCESS_PARAMS(CUPYPREP_GRID_CONSTANT)) {                             \
        preprocess_body<TIn, TOut, CN, DENSE, RAGGED, INTERP, XPT>(CUPYPREP_PREPROCESS_ARGS); \
    }

CUPYPREP_PREPROCESS_KERNEL(nearest, cp::INTERP_NEAREST)
CUPYPREP_PREPROCESS_KERNEL(linear, cp::INTERP_LINEAR)
CUPYPREP_PREPROCESS_KERNEL(cubic, cp::INTERP_CUBIC)
CUPYPREP_PREPROCESS_KERNEL(area, cp::INTERP_AREA)
