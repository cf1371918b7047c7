// Index-mapping copies: flip (cv2.flip), rotate90 (np.rot90, cv2.rotate) and pad
// (cv2.copyMakeBorder), all one kernel, cupyprep_copy_border<T, CN>.
//
// Output pixel (y, x) of a plane copies pixel
//   (border_index(y - top, sh), border_index(x - left, sw))
// of a source *view* (common.cuh's border_index: OpenCV's borderInterpolate), or takes the
// fill value bv[c] where a constant border gives -1. The host folds flips and quarter turns
// into that view: its first element at `s_off` from `src`, a flip a negative stride, a
// quarter turn the row and column strides swapped. A flip or a turn is the view with no
// border (top = left = 0 and the output the view's size), so every index is inside.
//
// Images are addressed through element strides, as resize.cu does: a "group" is a run of CN
// channels at stride s_c (CN = C for interleaved HWC images of up to 4 channels; CN = 1 and
// one group per channel plane otherwise). One thread per output pixel and group. Grid: x
// across blocks and threads, a row per blockIdx.y, an (image, group) pair per blockIdx.z;
// loops cover sizes past the grid's limits.
#include "common.cuh"

template <typename T, int CN>
__global__ void cupyprep_copy_border(const T* __restrict__ src, T* __restrict__ dst, int groups,
                                     int sh, int sw, int dh, int dw, cp::i64 s_off, cp::i64 s_n,
                                     cp::i64 s_g, cp::i64 s_y, cp::i64 s_x, cp::i64 s_c,
                                     cp::i64 d_n, cp::i64 d_g, cp::i64 d_y, cp::i64 d_x,
                                     cp::i64 d_c, int top, int left, int border, float bv0,
                                     float bv1, float bv2, float bv3, int planes) {
    // the border value per channel (the host rounded and saturated it as OpenCV's Scalar
    // is); planes take their channel's (more than 4 channels have one value)
    const float bvf[4] = {bv0, bv1, bv2, bv3};
    for (int plane = blockIdx.z; plane < planes; plane += gridDim.z) {
        const int n = plane / groups, g = plane - n * groups;
        T fill[CN];
#pragma unroll
        for (int c = 0; c < CN; ++c) fill[c] = cp::from_float<T>(bvf[groups > 1 ? min(g, 3) : c]);
        const T* img = src + s_off + n * s_n + g * s_g;
        T* out = dst + n * d_n + g * d_g;
        for (int y = blockIdx.y; y < dh; y += gridDim.y) {
            // the source row, once per row
            const int sy = cp::border_index(y - top, sh, border);
            const T* row = img + (sy < 0 ? 0 : (cp::i64)sy * s_y);
            T* q_row = out + (cp::i64)y * d_y;
            for (int x = blockIdx.x * blockDim.x + threadIdx.x; x < dw;
                 x += gridDim.x * blockDim.x) {
                const int sx = cp::border_index(x - left, sw, border);
                T* q = q_row + (cp::i64)x * d_x;
                if (sy < 0 || sx < 0) {
#pragma unroll
                    for (int c = 0; c < CN; ++c) q[c * d_c] = fill[c];
                } else {
                    const T* p = row + (cp::i64)sx * s_x;
                    T v[CN];
#pragma unroll
                    for (int c = 0; c < CN; ++c) v[c] = p[c * s_c];
#pragma unroll
                    for (int c = 0; c < CN; ++c) q[c * d_c] = v[c];
                }
            }
        }
    }
}
