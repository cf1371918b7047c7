// Resize with cv2.resize semantics: cupyprep_resize_<interpolation><T, CN>.
//
// Convention (as OpenCV): pixel centers at +0.5, src = (dst + 0.5) * scale - 0.5 with
// scale = 1 / (dst_size / src_size) in double precision; nearest takes
// floor(dst * scale). Images are addressed through element strides, so HWC, CHW, batches
// and non-contiguous views all use the same kernels: a "group" is a run of CN channels
// at stride s_c (CN = C for interleaved HWC images, CN = 1 and one group per plane for CHW).
//
// One thread per output pixel and group; a grid-stride loop over
// batch * groups * dst_h * dst_w (64-bit).
#include "common.cuh"

namespace {

struct Geometry {
    int groups, sh, sw, dh, dw;
    cp::i64 s_n, s_g, s_y, s_x, s_c;  // source element strides
    cp::i64 d_n, d_g, d_y, d_x, d_c;  // destination element strides
};

// Decompose a flat output index into (n, g, y, x) and return the two base offsets.
__device__ __forceinline__ void locate(const Geometry& g, cp::i64 i, int& dy, int& dx,
                                       cp::i64& src_base, cp::i64& dst_base) {
    dx = (int)(i % g.dw);
    cp::i64 r = i / g.dw;
    dy = (int)(r % g.dh);
    r /= g.dh;
    int grp = (int)(r % g.groups);
    cp::i64 n = r / g.groups;
    src_base = n * g.s_n + grp * g.s_g;
    dst_base = n * g.d_n + grp * g.d_g + dy * g.d_y + (cp::i64)dx * g.d_x;
}

// OpenCV's linear source coordinate: computed in double, rounded to float, split into an
// integer part (floor) and a float fraction.
__device__ __forceinline__ void linear_coord(int d, double scale, int& s, float& f) {
    float fs = (float)((d + 0.5) * scale - 0.5);
    s = __float2int_rd(fs);
    f = __fsub_rn(fs, (float)s);
}

}  // namespace

#define CUPYPREP_RESIZE_PARAMS                                                         \
    const T* __restrict__ src, T* __restrict__ dst, int groups, int sh, int sw, int dh,  \
        int dw, cp::i64 s_n, cp::i64 s_g, cp::i64 s_y, cp::i64 s_x, cp::i64 s_c,       \
        cp::i64 d_n, cp::i64 d_g, cp::i64 d_y, cp::i64 d_x, cp::i64 d_c,               \
        double scale_y, double scale_x, cp::i64 total

#define CUPYPREP_RESIZE_SETUP                                                          \
    const Geometry g = {groups, sh, sw, dh, dw, s_n, s_g, s_y, s_x, s_c,               \
                        d_n, d_g, d_y, d_x, d_c};                                       \
    const cp::i64 stride = (cp::i64)blockDim.x * gridDim.x;

// Nearest: OpenCV's INTER_NEAREST, sx = min(floor(dx * scale_x), sw - 1).
template <typename T, int CN>
__global__ void cupyprep_resize_nearest(CUPYPREP_RESIZE_PARAMS) {
    CUPYPREP_RESIZE_SETUP
    for (cp::i64 i = (cp::i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        int dy, dx;
        cp::i64 sb, db;
        locate(g, i, dy, dx, sb, db);
        int sy = min(__double2int_rd(dy * scale_y), sh - 1);
        int sx = min(__double2int_rd(dx * scale_x), sw - 1);
        const T* p = src + sb + sy * s_y + (cp::i64)sx * s_x;
#pragma unroll
        for (int c = 0; c < CN; ++c) dst[db + c * d_c] = p[c * s_c];
    }
}

// Linear. Horizontally the fraction is clamped to 0 at the edges (OpenCV clamps sx and
// sets fx = 0 there); vertically only the row indices are clamped and the weights keep
// their fraction, as OpenCV does.
//
// uint8 reproduces OpenCV's fixed point bit for bit: weights rint(w * 2048); a horizontal
// pass in int32; the vertical pass as its SIMD path computes it,
// ((S0 >> 4) * b0 >> 16) + ((S1 >> 4) * b1 >> 16), then (t + 2) >> 2, saturated.
// Other types compute in float32 with OpenCV's operation order (two products, then the
// sum), never contracted to FMA, and round-to-nearest on store.
template <typename T, int CN>
__global__ void cupyprep_resize_linear(CUPYPREP_RESIZE_PARAMS) {
    CUPYPREP_RESIZE_SETUP
    for (cp::i64 i = (cp::i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        int dy, dx;
        cp::i64 sb, db;
        locate(g, i, dy, dx, sb, db);
        int sx, sy;
        float fx, fy;
        linear_coord(dx, scale_x, sx, fx);
        linear_coord(dy, scale_y, sy, fy);
        if (sx < 0) { sx = 0; fx = 0.f; }
        if (sx >= sw - 1) { sx = sw - 1; fx = 0.f; }
        const int sx1 = min(sx + 1, sw - 1);
        const int sy0 = cp::clamp_index(sy, 0, sh - 1);
        const int sy1 = cp::clamp_index(sy + 1, 0, sh - 1);
        const T* r0 = src + sb + sy0 * s_y;
        const T* r1 = src + sb + sy1 * s_y;
        const cp::i64 x0 = (cp::i64)sx * s_x, x1 = (cp::i64)sx1 * s_x;
        const float ax0 = __fsub_rn(1.f, fx), ay0 = __fsub_rn(1.f, fy);
        if constexpr (sizeof(T) == 1) {
            const int a0 = __float2int_rn(__fmul_rn(ax0, 2048.f));
            const int a1 = __float2int_rn(__fmul_rn(fx, 2048.f));
            const int b0 = __float2int_rn(__fmul_rn(ay0, 2048.f));
            const int b1 = __float2int_rn(__fmul_rn(fy, 2048.f));
#pragma unroll
            for (int c = 0; c < CN; ++c) {
                const cp::i64 o = c * s_c;
                const int S0 = (int)r0[x0 + o] * a0 + (int)r0[x1 + o] * a1;
                const int S1 = (int)r1[x0 + o] * a0 + (int)r1[x1 + o] * a1;
                const int t = (((S0 >> 4) * b0) >> 16) + (((S1 >> 4) * b1) >> 16);
                dst[db + c * d_c] = cp::saturate_u8((t + 2) >> 2);
            }
        } else {
#pragma unroll
            for (int c = 0; c < CN; ++c) {
                const cp::i64 o = c * s_c;
                const float S0 = __fadd_rn(__fmul_rn(cp::to_float(r0[x0 + o]), ax0),
                                           __fmul_rn(cp::to_float(r0[x1 + o]), fx));
                const float S1 = __fadd_rn(__fmul_rn(cp::to_float(r1[x0 + o]), ax0),
                                           __fmul_rn(cp::to_float(r1[x1 + o]), fx));
                dst[db + c * d_c] =
                    cp::from_float<T>(__fadd_rn(__fmul_rn(S0, ay0), __fmul_rn(S1, fy)));
            }
        }
    }
}
