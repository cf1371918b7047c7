// RoI Align forward, torchvision.ops.roi_align semantics.
//
// cupyprep_roi_align<T, ALIGNED>: one thread per output element (k, c, ph, pw) of the
// (K, C, PH, PW) output. rois: (K, 5) float32 rows (image index, x1, y1, x2, y2).
// Arithmetic is torchvision's CUDA kernel in float32, every operation rounded separately;
// float16 features are read exactly and the mean is rounded to float16 once.
#include "common.cuh"

namespace {

template <typename T>
__device__ __forceinline__ float bilinear(const T* img, cp::i64 s_y, cp::i64 s_x, int height,
                                          int width, float y, float x) {
    // !(in range) so that NaN coordinates also give 0
    if (!(y >= -1.0f && y <= (float)height && x >= -1.0f && x <= (float)width)) return 0.0f;
    if (y <= 0.0f) y = 0.0f;
    if (x <= 0.0f) x = 0.0f;
    int y_low = (int)y, x_low = (int)x, y_high, x_high;
    if (y_low >= height - 1) {
        y_high = y_low = height - 1;
        y = (float)y_low;
    } else {
        y_high = y_low + 1;
    }
    if (x_low >= width - 1) {
        x_high = x_low = width - 1;
        x = (float)x_low;
    } else {
        x_high = x_low + 1;
    }
    const float ly = __fsub_rn(y, (float)y_low), lx = __fsub_rn(x, (float)x_low);
    const float hy = __fsub_rn(1.0f, ly), hx = __fsub_rn(1.0f, lx);
    const float v1 = cp::to_float(img[y_low * s_y + x_low * s_x]);
    const float v2 = cp::to_float(img[y_low * s_y + x_high * s_x]);
    const float v3 = cp::to_float(img[y_high * s_y + x_low * s_x]);
    const float v4 = cp::to_float(img[y_high * s_y + x_high * s_x]);
    const float w1 = __fmul_rn(hy, hx), w2 = __fmul_rn(hy, lx);
    const float w3 = __fmul_rn(ly, hx), w4 = __fmul_rn(ly, lx);
    float val = __fadd_rn(__fmul_rn(w1, v1), __fmul_rn(w2, v2));
    val = __fadd_rn(val, __fmul_rn(w3, v3));
    return __fadd_rn(val, __fmul_rn(w4, v4));
}

// ceil(v) as a sample count; not finite or absurd -> 0 (an empty grid)
__device__ __forceinline__ int grid_count(float v) {
    if (!(v > -1048576.0f && v < 1048576.0f)) return 0;
    return (int)ceilf(v);
}

}  // namespace

template <typename T, bool ALIGNED>
__global__ void cupyprep_roi_align(const T* __restrict__ features, cp::i64 f_n, cp::i64 f_c,
                                   cp::i64 f_y, cp::i64 f_x, int N, int C, int height, int width,
                                   const float* __restrict__ rois, cp::i64 r_k, cp::i64 r_j,
                                   float spatial_scale, int pooled_h, int pooled_w,
                                   int sampling_ratio, cp::i64 total, T* __restrict__ out) {
    const cp::i64 stride = (cp::i64)blockDim.x * gridDim.x;
    for (cp::i64 i = (cp::i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const int pw = (int)(i % pooled_w);
        cp::i64 r = i / pooled_w;
        const int ph = (int)(r % pooled_h);
        r /= pooled_h;
        const int c = (int)(r % C);
        const cp::i64 k = r / C;
        const float* roi = rois + k * r_k;
        const float bf = roi[0];
        // truncation toward zero, as torchvision's (int) cast; out of the batch: zeros
        if (!(bf > -1.0f && bf < (float)N)) {
            out[i] = cp::from_float<T>(0.0f);
            continue;
        }
        const int batch = (int)bf;
        const float offset = ALIGNED ? 0.5f : 0.0f;
        const float start_w = __fsub_rn(__fmul_rn(roi[r_j], spatial_scale), offset);
        const float start_h = __fsub_rn(__fmul_rn(roi[2 * r_j], spatial_scale), offset);
        const float end_w = __fsub_rn(__fmul_rn(roi[3 * r_j], spatial_scale), offset);
        const float end_h = __fsub_rn(__fmul_rn(roi[4 * r_j], spatial_scale), offset);
        float roi_w = __fsub_rn(end_w, start_w);
        float roi_h = __fsub_rn(end_h, start_h);
        if (!ALIGNED) {
            roi_w = fmaxf(roi_w, 1.0f);
            roi_h = fmaxf(roi_h, 1.0f);
        }
        const float bin_h = __fdiv_rn(roi_h, (float)pooled_h);
        const float bin_w = __fdiv_rn(roi_w, (float)pooled_w);
        const int grid_h = sampling_ratio > 0 ? sampling_ratio : grid_count(bin_h);
        const int grid_w = sampling_ratio > 0 ? sampling_ratio : grid_count(bin_w);
        const int n_samples = grid_h * grid_w;
        const float count = (float)(n_samples > 1 ? n_samples : 1);
        const T* img = features + batch * f_n + c * f_c;
        const float y0 = __fadd_rn(start_h, __fmul_rn((float)ph, bin_h));
        const float x0 = __fadd_rn(start_w, __fmul_rn((float)pw, bin_w));
        float acc = 0.0f;
        for (int iy = 0; iy < grid_h; ++iy) {
            const float y = __fadd_rn(y0, __fdiv_rn(__fmul_rn((float)iy + 0.5f, bin_h), (float)grid_h));
            for (int ix = 0; ix < grid_w; ++ix) {
                const float x = __fadd_rn(x0, __fdiv_rn(__fmul_rn((float)ix + 0.5f, bin_w), (float)grid_w));
                acc = __fadd_rn(acc, bilinear<T>(img, f_y, f_x, height, width, y, x));
            }
        }
        out[i] = cp::from_float<T>(__fdiv_rn(acc, count));
    }
}
