// Crop-and-resize (TensorFlow's crop_and_resize, a "roi resize"): cupyprep_crop_resize<T, CN,
// INTERP>. Output k is cv2.resize of box k's pixels, image[y1:y2, x1:x2], to dh x dw, with
// the same arithmetic as resize.cu (sampling.cuh's `sample`), so a crop equals a resize of
// the sliced image bit for bit.
//
// Boxes are float32 rows, `b_k` apart, coordinates `b_c` apart: (image, x1, y1, x2, y2)
// with `with_index`, else (x1, y1, x2, y2) of image 0. The integer bounds of a box:
//   x1 = clamp(rint(x1), 0, w - 1),  x2 = clamp(rint(x2), x1 + 1, w)   (y alike),
// rint rounding half to even, NaN counting as -infinity: every box keeps at least one
// pixel of its image. An image index that is not an integer in [0, n_src) gives zeros.
//
// Sources are one strided batch (`src`, one geometry) or, where `src` is NULL, a ragged
// list: up to cp::kImagesByValue image records by value (`src_list`), or a longer list's
// records in `src_table`. Grid: x across blocks and threads, a row per blockIdx.y, a box
// per blockIdx.z; loops cover sizes past the grid's limits.
#include "sampling.cuh"

namespace {

// Far-away and non-finite coordinates clamp here before the conversion to int.
constexpr float kFar = 1073741824.f;  // 2^30

__device__ __forceinline__ int box_bound(float v, int lo, int hi) {
    v = v != v ? -kFar : fminf(fmaxf(v, -kFar), kFar);
    return cp::clamp_index(__float2int_rn(v), lo, hi);
}

}  // namespace

template <typename T, int CN, int INTERP>
__global__ void cupyprep_crop_resize(
    const T* __restrict__ src, const cp::RaggedImage* __restrict__ src_table,
    const __grid_constant__ cp::ByValue<cp::RaggedImage, cp::kImagesByValue> src_list,
    int n_src, int sh, int sw, cp::i64 s_n, cp::i64 s_y, cp::i64 s_x, cp::i64 s_c,
    const float* __restrict__ boxes, cp::i64 b_k, cp::i64 b_c, int with_index,
    T* __restrict__ dst, int dh, int dw, cp::i64 d_n, cp::i64 d_y, cp::i64 d_x, cp::i64 d_c,
    int n_boxes) {
    for (int k = blockIdx.z; k < n_boxes; k += gridDim.z) {
        const float* b = boxes + (cp::i64)k * b_k;
        int n = 0;
        if (with_index) {
            const float f = b[0];
            n = (f >= 0.f && f < (float)n_src && f == floorf(f)) ? (int)f : -1;
            b += b_c;
        }
        T* out = dst + (cp::i64)k * d_n;
        if (n < 0) {
            for (int dy = blockIdx.y; dy < dh; dy += gridDim.y)
                for (int dx = blockIdx.x * blockDim.x + threadIdx.x; dx < dw;
                     dx += gridDim.x * blockDim.x) {
                    T* q = out + (cp::i64)dy * d_y + (cp::i64)dx * d_x;
#pragma unroll
                    for (int c = 0; c < CN; ++c) q[c * d_c] = cp::from_float<T>(0.f);
                }
            continue;
        }
        const T* base;
        int h, w;
        cp::i64 iy, ix, ic;
        if (src == nullptr) {
            const cp::RaggedImage& r = src_table ? src_table[n] : src_list.v[n];
            base = reinterpret_cast<const T*>(r.ptr);
            h = r.h;
            w = r.w;
            iy = r.s_y;
            ix = r.s_x;
            ic = r.s_c;
        } else {
            base = src + (cp::i64)n * s_n;
            h = sh;
            w = sw;
            iy = s_y;
            ix = s_x;
            ic = s_c;
        }
        const int x1 = box_bound(b[0], 0, w - 1), y1 = box_bound(b[b_c], 0, h - 1);
        const int x2 = box_bound(b[2 * b_c], x1 + 1, w), y2 = box_bound(b[3 * b_c], y1 + 1, h);
        const int bh = y2 - y1, bw = x2 - x1;
        // resize's scale: 1 / (dst / src) in double, as the host computes it for resize
        const double scale_y = __ddiv_rn(1.0, __ddiv_rn((double)dh, (double)bh));
        const double scale_x = __ddiv_rn(1.0, __ddiv_rn((double)dw, (double)bw));
        const T* img = base + (cp::i64)y1 * iy + (cp::i64)x1 * ix;
        for (int dy = blockIdx.y; dy < dh; dy += gridDim.y)
            for (int dx = blockIdx.x * blockDim.x + threadIdx.x; dx < dw;
                 dx += gridDim.x * blockDim.x) {
                T v[CN];
                cp::sample<T, CN, INTERP>(img, iy, ix, ic, bh, bw, dw, dy, dx, scale_y, scale_x, v);
                T* q = out + (cp::i64)dy * d_y + (cp::i64)dx * d_x;
#pragma unroll
                for (int c = 0; c < CN; ++c) q[c * d_c] = v[c];
            }
    }
}
