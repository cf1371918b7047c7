// Resize with cv2.resize semantics: cupyprep_resize_<interpolation><T, CN>, and for area
// one kernel per OpenCV algorithm (cupyprep_resize_area_fast / _weighted / _up).
//
// Convention (as OpenCV): pixel centers at +0.5, src = (dst + 0.5) * scale - 0.5 with
// scale = 1 / (dst_size / src_size) in double precision; nearest takes
// floor(dst * scale). Images are addressed through element strides, so HWC, CHW, batches
// and non-contiguous views all use the same kernels: a "group" is a run of CN channels
// at stride s_c (CN = C for interleaved HWC images, CN = 1 and one group per plane for CHW).
//
// One thread per output pixel and group. Grid: x across blocks and threads, a row per
// blockIdx.y, an (image, group) pair per blockIdx.z; loops cover sizes past the grid's
// limits, and no thread divides per pixel.
#include "sampling.cuh"


#define CUPYPREP_RESIZE_PARAMS                                                         \
    const T* __restrict__ src, T* __restrict__ dst, int groups, int sh, int sw, int dh,  \
        int dw, cp::i64 s_n, cp::i64 s_g, cp::i64 s_y, cp::i64 s_x, cp::i64 s_c,       \
        cp::i64 d_n, cp::i64 d_g, cp::i64 d_y, cp::i64 d_x, cp::i64 d_c,               \
        double scale_y, double scale_x, int planes

// The loop nest every resize kernel runs its body in: `sb` / `db` are the source image's
// (group's) base offset and the destination pixel's offset; `planes` = batch * groups.
#define CUPYPREP_RESIZE_BEGIN                                                           \
    for (int plane = blockIdx.z; plane < planes; plane += gridDim.z) {                  \
        const int n_ = plane / groups, grp_ = plane - n_ * groups;                      \
        const cp::i64 sb = n_ * s_n + grp_ * s_g, db0 = n_ * d_n + grp_ * d_g;          \
        for (int dy = blockIdx.y; dy < dh; dy += gridDim.y)                             \
            for (int dx = blockIdx.x * blockDim.x + threadIdx.x; dx < dw;               \
                 dx += gridDim.x * blockDim.x) {                                        \
                const cp::i64 db = db0 + (cp::i64)dy * d_y + (cp::i64)dx * d_x;
#define CUPYPREP_RESIZE_END \
    }                       \
    }  // planes

// Store CN sampled values at the destination.
template <typename T, int CN>
__device__ __forceinline__ void store(T* dst, cp::i64 d_c, const T (&v)[CN]) {
#pragma unroll
    for (int c = 0; c < CN; ++c) dst[c * d_c] = v[c];
}

// The kernels of the interpolations that are one per-pixel formula (sampling.cuh has them).
// PIXEL_CN: the pixel's channel count as OpenCV sees it, where a thread takes one plane of
// a pixel of more than 4 channels (sampling.cuh's sample_area_2x2: only 2x2 cells use it).
#define CUPYPREP_RESIZE_KERNEL(NAME, CALL)                                                \
    template <typename T, int CN, int PIXEL_CN = CN>                                      \
    __global__ void cupyprep_resize_##NAME(CUPYPREP_RESIZE_PARAMS) {                      \
        CUPYPREP_RESIZE_BEGIN                                                             \
        T v[CN];                                                                          \
        CALL;                                                                             \
        store<T, CN>(dst + db, d_c, v);                                                   \
        CUPYPREP_RESIZE_END                                                               \
    }

// INTER_NEAREST: sx = min(floor(dx * scale_x), sw - 1).
CUPYPREP_RESIZE_KERNEL(nearest, (cp::sample<T, CN, cp::INTERP_NEAREST>(
                                    src + sb, s_y, s_x, s_c, sh, sw, dw, dy, dx, scale_y, scale_x, v)))
// INTER_LINEAR (sampling.cuh: OpenCV's fixed point for uint8, its float order otherwise,
// and its switch to the area fast path at an exact factor of 2).
CUPYPREP_RESIZE_KERNEL(linear, (cp::sample<T, CN, cp::INTERP_LINEAR, PIXEL_CN>(
                                   src + sb, s_y, s_x, s_c, sh, sw, dw, dy, dx, scale_y, scale_x, v)))
// INTER_CUBIC (sampling.cuh). CN is the channel count OpenCV sees (1 for planes), so the
// destination row OpenCV splits into SIMD body and scalar tail is dw * CN long.
CUPYPREP_RESIZE_KERNEL(cubic, (cp::sample<T, CN, cp::INTERP_CUBIC>(
                                  src + sb, s_y, s_x, s_c, sh, sw, dw, dy, dx, scale_y, scale_x, v)))

// Area: OpenCV's INTER_AREA, which is three algorithms; the host picks one kernel per call
// the way OpenCV picks (from scale_x, scale_y alone), so a profile shows which ran.

// Area, fast regime: both scales within DBL_EPSILON of integers isx, isy >= 1; each output
// is the mean of its isy x isx cell (sampling.cuh's sample_area_fast, which preprocess
// shares).
template <typename T, int CN, int PIXEL_CN = CN>
__global__ void cupyprep_resize_area_fast(CUPYPREP_RESIZE_PARAMS, int isy, int isx) {
    const float inv_area = __fdiv_rn(1.f, (float)(isx * isy));
    const int whole_cells = sw / isx;
    CUPYPREP_RESIZE_BEGIN
        T v[CN];
        cp::sample_area_fast<T, CN, PIXEL_CN>(src + sb, s_y, s_x, s_c, sh, sw, dy, dx, isy, isx,
                                    whole_cells, inv_area, v);
        store<T, CN>(dst + db, d_c, v);
    CUPYPREP_RESIZE_END
}

// Area, weighted regime: both scales >= 1, not both integers. Per axis the host builds
// OpenCV's table (computeResizeAreaTab): for destination index d, `tab[3d]` is the first
// source index, `tab[3d + 1]` the number of consecutive sources it covers, `tab[3d + 2]`
// where their float32 weights start in `w`. In float32, as OpenCV: per covered source row,
// buf = 0; buf = buf + p * alpha across the row's entries; then acc = beta0 * buf0 and
// acc = acc + beta * buf for the other rows; rounded to nearest on store.
template <typename T, int CN>
__global__ void cupyprep_resize_area_weighted(CUPYPREP_RESIZE_PARAMS,
                                              const int* __restrict__ xtab,
                                              const float* __restrict__ xw,
                                              const int* __restrict__ ytab,
                                              const float* __restrict__ yw) {
    CUPYPREP_RESIZE_BEGIN
        const int* tx = xtab + 3 * (cp::i64)dx;
        const int* ty = ytab + 3 * (cp::i64)dy;
        const int nx = tx[1], ny = ty[1];
        const float* alpha = xw + tx[2];
        const float* beta = yw + ty[2];
        float acc[CN];
#pragma unroll
        for (int c = 0; c < CN; ++c) acc[c] = 0.f;
        for (int k = 0; k < ny; ++k) {
            const T* row = src + sb + (cp::i64)(ty[0] + k) * s_y + (cp::i64)tx[0] * s_x;
#pragma unroll
            for (int c = 0; c < CN; ++c) {
                const T* p = row + c * s_c;
                float buf = 0.f;
                for (int j = 0; j < nx; ++j)
                    buf = __fadd_rn(buf, __fmul_rn(cp::to_float(p[(cp::i64)j * s_x]), alpha[j]));
                const float term = __fmul_rn(beta[k], buf);
                acc[c] = k == 0 ? term : __fadd_rn(acc[c], term);
            }
        }
#pragma unroll
        for (int c = 0; c < CN; ++c) dst[db + c * d_c] = cp::from_float<T>(acc[c]);
    CUPYPREP_RESIZE_END
}

namespace {

// Area's coordinate where an axis is upscaled: OpenCV's linear "area mode",
// s = floor(d * scale), f = frac((d + 1) - (s + 1) * inv_scale) (0 where not positive),
// with inv_scale OpenCV's own (dst / src), not 1 / scale.
__device__ __forceinline__ void area_up_coord(int d, double scale, double inv, int& s,
                                              float& f) {
    s = __double2int_rd(__dmul_rn((double)d, scale));
    f = (float)__dsub_rn((double)(d + 1), __dmul_rn((double)(s + 1), inv));
    f = f <= 0.f ? 0.f : __fsub_rn(f, (float)__float2int_rd(f));
}

}  // namespace

// Area, upscale regime (either scale below 1, so also up on one axis and down on the
// other): OpenCV's linear interpolation with area_up_coord's coordinates on both axes.
// As in linear, sx at the right edge clamps with fx = 0 and rows are clamped only.
template <typename T, int CN>
__global__ void cupyprep_resize_area_up(CUPYPREP_RESIZE_PARAMS, double inv_y, double inv_x) {
    CUPYPREP_RESIZE_BEGIN
        int sx, sy;
        float fx, fy;
        area_up_coord(dx, scale_x, inv_x, sx, fx);
        area_up_coord(dy, scale_y, inv_y, sy, fy);
        const cp::Taps tx = cp::linear_taps_at(sx, fx, sw, s_x, true);  // sx >= 0
        const cp::Taps ty = cp::linear_taps_at(sy, fy, sh, s_y, false);
        T v[CN];
        cp::linear_blend<T, CN>(src + sb, s_c, tx, ty, v);
        store<T, CN>(dst + db, d_c, v);
    CUPYPREP_RESIZE_END
}
