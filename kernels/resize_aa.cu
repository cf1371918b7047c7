// Antialiased resize with torchvision's semantics (resize(antialias=True), PyTorch's CPU
// kernels): one launch per resampled axis, x first, then y (cupyprep/cpu/antialias.py is
// the specification and builds the per-axis tables these kernels read).
//
// cupyprep_resize_aa<TIn, TOut, CN, HORIZONTAL>: out(b, a) = sum over j < count[a] of
// w[a][j] * in(b, start[a] + j), `a` the resampled axis (x when HORIZONTAL, else y) and
// `b` the other. uint8 -> uint8 is PyTorch's fixed point: integer weights with `precision`
// fractional bits, the sum started at 2^(precision - 1), shifted right and clamped to
// [0, 255]. Every other pair sums float32 products in tap order, unfused, and stores with
// from_float (a float32 intermediate between the passes).
//
// One thread per output pixel and group of CN channels (as resize.cu: a group is a run of
// CN channels at stride s_c; planar or wide images go one plane per group). Grid: x across
// blocks and threads, a row per blockIdx.y, an (image, group) pair per blockIdx.z; loops
// cover sizes past the grid's limits. The weights come as int (wfix, uint8's path) or float
// (wflt), the other pointer null; each row of the table holds k of them.
#include "common.cuh"

namespace {

template <typename TIn, typename TOut>
struct AaFixed {
    static constexpr bool value = false;
};
template <>
struct AaFixed<unsigned char, unsigned char> {
    static constexpr bool value = true;
};

}  // namespace

template <typename TIn, typename TOut, int CN, bool HORIZONTAL>
__global__ void cupyprep_resize_aa(const TIn* __restrict__ src, TOut* __restrict__ dst,
                                   int groups, int dh, int dw, cp::i64 s_n, cp::i64 s_g,
                                   cp::i64 s_y, cp::i64 s_x, cp::i64 s_c, cp::i64 d_n,
                                   cp::i64 d_g, cp::i64 d_y, cp::i64 d_x, cp::i64 d_c,
                                   const int* __restrict__ start, const int* __restrict__ count,
                                   const int* __restrict__ wfix, const float* __restrict__ wflt,
                                   int k, int precision,
                                   int planes) {
    constexpr bool kFixed = AaFixed<TIn, TOut>::value;
    const cp::i64 s_a = HORIZONTAL ? s_x : s_y, s_b = HORIZONTAL ? s_y : s_x;
    for (int plane = blockIdx.z; plane < planes; plane += gridDim.z) {
        const int n = plane / groups, grp = plane - n * groups;
        const cp::i64 sb = n * s_n + grp * s_g, db0 = n * d_n + grp * d_g;
        for (int dy = blockIdx.y; dy < dh; dy += gridDim.y)
            for (int dx = blockIdx.x * blockDim.x + threadIdx.x; dx < dw;
                 dx += gridDim.x * blockDim.x) {
                const int a = HORIZONTAL ? dx : dy, b = HORIZONTAL ? dy : dx;
                const int taps = count[a];
                const TIn* p = src + sb + (cp::i64)b * s_b + (cp::i64)start[a] * s_a;
                TOut* q = dst + db0 + (cp::i64)dy * d_y + (cp::i64)dx * d_x;
                if constexpr (kFixed) {
                    const int* w = wfix + (cp::i64)a * k;
                    int acc[CN];
#pragma unroll
                    for (int c = 0; c < CN; ++c) acc[c] = 1 << (precision - 1);
                    for (int j = 0; j < taps; ++j) {
                        const TIn* pj = p + (cp::i64)j * s_a;
#pragma unroll
                        for (int c = 0; c < CN; ++c) acc[c] += (int)pj[c * s_c] * w[j];
                    }
#pragma unroll
                    for (int c = 0; c < CN; ++c) {
                        const int v = acc[c] >> precision;
                        q[c * d_c] = (TOut)(v < 0 ? 0 : (v > 255 ? 255 : v));
                    }
                } else {
                    const float* w = wflt + (cp::i64)a * k;
                    float acc[CN];
#pragma unroll
                    for (int c = 0; c < CN; ++c) acc[c] = 0.f;
                    for (int j = 0; j < taps; ++j) {
                        const TIn* pj = p + (cp::i64)j * s_a;
#pragma unroll
                        for (int c = 0; c < CN; ++c) {
                            const float t = __fmul_rn(cp::to_float(pj[c * s_c]), w[j]);
                            acc[c] = j == 0 ? t : __fadd_rn(acc[c], t);
                        }
                    }
#pragma unroll
                    for (int c = 0; c < CN; ++c) q[c * d_c] = cp::from_float<TOut>(acc[c]);
                }
            }
    }
}
