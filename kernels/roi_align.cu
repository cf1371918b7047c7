// RoI Align forward, torchvision.ops.roi_align semantics.
//
// cupyprep_roi_align<T, ALIGNED>: a block takes one roi (blockIdx.x) and a chunk of
// c_chunk channels (blockIdx.y, looping past the grid); its threads make the chunk's
// outputs (c, ph, pw) of the (K, C, PH, PW) output. rois: (K, 5) float32 rows (image
// index, x1, y1, x2, y2). Arithmetic is torchvision's CUDA kernel in float32, every
// operation rounded separately; float16 features are read exactly and the mean is rounded
// to float16 once.
//
// Rois vary fastest across the grid, so the blocks resident at one time read the same few
// channels of every image: those planes stay in the L2 cache while all the rois that
// overlap them are pooled.
//
// A sample's position, taps and weights along y depend only on (ph, iy), along x only on
// (pw, ix), and neither on the channel: the block works them out once per roi into shared
// memory (when the roi's PH * grid_h and PW * grid_w fit) and every channel reads them
// there, as 32-bit offsets; torchvision computes them again for every output element. Rois
// whose adaptive grids do not fit, and images whose offsets need 64 bits, compute them per
// output with the same arithmetic.
#include "common.cuh"

namespace {

// Per-axis table entries in shared memory (sampling ratio 2 with 7 x 7 bins needs 14).
constexpr int kRoiAxisCap = 128;

// One axis of a sample: torchvision's bilinear rules along it. lo / hi: the two taps'
// indices; l: the weight of hi (1 - l that of lo), or -1 where the coordinate lies outside
// [-1, size] (NaN included), which makes the whole sample 0.
struct AxisTaps {
    int lo, hi;
    float l;
};

// Sample i (of grid) of bin p along an axis starting at `start` with bins of `bin`.
__device__ __forceinline__ AxisTaps axis_taps(float start, float bin, int p, int i, int grid,
                                              int size) {
    const float v0 = __fadd_rn(start, __fmul_rn((float)p, bin));
    float v = __fadd_rn(v0, __fdiv_rn(__fmul_rn((float)i + 0.5f, bin), (float)grid));
    AxisTaps t{0, 0, -1.0f};
    if (!(v >= -1.0f && v <= (float)size)) return t;
    if (v <= 0.0f) v = 0.0f;
    t.lo = (int)v;
    if (t.lo >= size - 1) {
        t.hi = t.lo = size - 1;
        v = (float)t.lo;
    } else {
        t.hi = t.lo + 1;
    }
    t.l = __fsub_rn(v, (float)t.lo);
    return t;
}

// torchvision's bilinear_interpolate from the taps' offsets along each axis (row offsets
// y0, y1 with weight ly of y1; column offsets x0, x1 with weight lx of x1): 0 unless both
// weights are >= 0 (an axis outside its range has -1).
template <typename T, typename Off>
__device__ __forceinline__ float sample(const T* img, Off y0, Off y1, float ly, Off x0, Off x1,
                                        float lx) {
    if (!(ly >= 0.0f && lx >= 0.0f)) return 0.0f;
    const float v1 = cp::to_float(img[y0 + x0]);
    const float v2 = cp::to_float(img[y0 + x1]);
    const float v3 = cp::to_float(img[y1 + x0]);
    const float v4 = cp::to_float(img[y1 + x1]);
    const float hy = __fsub_rn(1.0f, ly), hx = __fsub_rn(1.0f, lx);
    const float w1 = __fmul_rn(hy, hx), w2 = __fmul_rn(hy, lx);
    const float w3 = __fmul_rn(ly, hx), w4 = __fmul_rn(ly, lx);
    float val = __fadd_rn(__fmul_rn(w1, v1), __fmul_rn(w2, v2));
    val = __fadd_rn(val, __fmul_rn(w3, v3));
    return __fadd_rn(val, __fmul_rn(w4, v4));
}

// A bin's sample taps along one axis for one roi, in shared memory as separate arrays of
// 32-bit words (lanes reading different entries then fall in different banks): the taps'
// offsets (index times the axis stride, which the host has checked fit in int32) and l.
struct AxisTable {
    int lo[kRoiAxisCap], hi[kRoiAxisCap];
    float l[kRoiAxisCap];
    __device__ __forceinline__ void put(int t, const AxisTaps& a, cp::i64 stride) {
        lo[t] = (int)(a.lo * stride);
        hi[t] = (int)(a.hi * stride);
        l[t] = a.l;
    }
};

// n / d for 0 <= n: n * m >> 32 with m = ceil(2^32 / d), which the host passes where it is
// exact for every n the kernel divides (n * d < 2^32), else 0 for a plain division.
__device__ __forceinline__ int divide(int n, int d, unsigned m) {
    return m ? (int)__umulhi((unsigned)n, m) : n / d;
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
                                   int sampling_ratio, int K, int c_chunk, int narrow,
                                   unsigned m_bins, unsigned m_pw, T* __restrict__ out) {
    __shared__ AxisTable ys, xs;
    const int bins = pooled_h * pooled_w;
    for (int k = blockIdx.x; k < K; k += gridDim.x) {
        const float* roi = rois + (cp::i64)k * r_k;
        const float bf = roi[0];
        // truncation toward zero, as torchvision's (int) cast; out of the batch: zeros
        const bool in_batch = bf > -1.0f && bf < (float)N;
        const int batch = in_batch ? (int)bf : 0;
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
        const float count = (float)(grid_h * grid_w > 1 ? grid_h * grid_w : 1);
        const cp::i64 ny = (cp::i64)pooled_h * grid_h, nx = (cp::i64)pooled_w * grid_w;
        const bool table = in_batch && narrow && ny <= kRoiAxisCap && nx <= kRoiAxisCap;
        __syncthreads();  // the previous roi's table is no longer read
        if (table) {
            for (int t = threadIdx.x; t < (int)ny; t += blockDim.x)
                ys.put(t, axis_taps(start_h, bin_h, t / grid_h, t % grid_h, grid_h, height), f_y);
            for (int t = threadIdx.x; t < (int)nx; t += blockDim.x)
                xs.put(t, axis_taps(start_w, bin_w, t / grid_w, t % grid_w, grid_w, width), f_x);
        }
        __syncthreads();
        for (int c0 = blockIdx.y * c_chunk; c0 < C; c0 += gridDim.y * c_chunk) {
            const int items = (min(C, c0 + c_chunk) - c0) * bins;
            for (int j = threadIdx.x; j < items; j += blockDim.x) {
                const int cl = divide(j, bins, m_bins), b = j - cl * bins;
                const int ph = divide(b, pooled_w, m_pw), pw = b - ph * pooled_w;
                const int c = c0 + cl;
                T* o = out + ((cp::i64)k * C + c) * bins + b;
                if (!in_batch) {
                    *o = cp::from_float<T>(0.0f);
                    continue;
                }
                const T* img = features + batch * f_n + c * f_c;
                float acc = 0.0f;
                if (table) {
                    // offsets within the image in int32
                    for (int iy = 0; iy < grid_h; ++iy) {
                        const int ty = ph * grid_h + iy;
                        const int y0 = ys.lo[ty], y1 = ys.hi[ty];
                        const float ly = ys.l[ty];
                        for (int ix = 0; ix < grid_w; ++ix) {
                            const int tx = pw * grid_w + ix;
                            acc = __fadd_rn(acc, sample<T, int>(img, y0, y1, ly, xs.lo[tx], xs.hi[tx],
                                                                xs.l[tx]));
                        }
                    }
                } else {
                    for (int iy = 0; iy < grid_h; ++iy) {
                        const AxisTaps y = axis_taps(start_h, bin_h, ph, iy, grid_h, height);
                        for (int ix = 0; ix < grid_w; ++ix) {
                            const AxisTaps x = axis_taps(start_w, bin_w, pw, ix, grid_w, width);
                            acc = __fadd_rn(acc, sample<T, cp::i64>(img, y.lo * f_y, y.hi * f_y, y.l,
                                                                    x.lo * f_x, x.hi * f_x, x.l));
                        }
                    }
                }
                *o = cp::from_float<T>(__fdiv_rn(acc, count));
            }
        }
    }
}
