// Element-wise box math: format conversion, clipping, pairwise IoU, and the decoders of
// detection heads (SSD / RetinaFace anchors and landmarks, YOLO rows). Each op is one
// launch over its output, with the CPU backend's NumPy expression (cupyprep/cpu/detection.py)
// as its specification: the same operations in the same order, each rounded on its own
// (no contraction into fused multiply-adds).
//
// Inputs are read through element strides as (A, P, K) arrays: the caller merges the
// leading dimensions into A (copying only where their strides do not merge), P is the
// second-last dimension and K the last. Outputs are contiguous.
#include "common.cuh"

namespace {

// A result of the boxes' own dtype: float32 as computed; float16 rounded to float16 after
// every operation, as NumPy's float16 arithmetic does (computed in float32, rounded back);
// float64 (computed in double) as computed.
template <typename T> __device__ __forceinline__ float in_dtype(float v) { return v; }
template <> __device__ __forceinline__ float in_dtype<cp_half>(float v) {
    return cp::to_float(cp::from_float<cp_half>(v));
}
template <typename T> __device__ __forceinline__ double in_dtype(double v) { return v; }

// NumPy's maximum / minimum: NaN in the first operand propagates; otherwise the first
// operand unless the second is strictly larger / smaller.
__device__ __forceinline__ float np_maximum(float a, float b) { return (a >= b || a != a) ? a : b; }
__device__ __forceinline__ float np_minimum(float a, float b) { return (a <= b || a != a) ? a : b; }

// Row r of an (A, P, K) input: the element offset of its first value.
__device__ __forceinline__ cp::i64 row_offset(cp::i64 r, cp::i64 P, cp::i64 s_a, cp::i64 s_p) {
    return (r / P) * s_a + (r % P) * s_p;
}

}  // namespace

// box_convert: IN / OUT 0 xyxy, 1 xywh, 2 cxcywh; through xyxy, in the boxes' dtype:
// x1 = cx - 0.5 * w, x2 = x + w, cx = (x1 + x2) / 2, w = x2 - x1; IN == OUT copies.
template <typename T, int IN, int OUT>
__global__ void cupyprep_box_convert(const T* __restrict__ src, cp::i64 P, cp::i64 s_a, cp::i64 s_p,
                                     cp::i64 s_k, T* __restrict__ dst, cp::i64 rows) {
    const cp::i64 stride = (cp::i64)blockDim.x * gridDim.x;
    for (cp::i64 r = (cp::i64)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += stride) {
        const T* p = src + row_offset(r, P, s_a, s_p);
        T* q = dst + 4 * r;
        if (IN == OUT) {  // a copy, as torchvision's
#pragma unroll
            for (int k = 0; k < 4; ++k) q[k] = p[k * s_k];
            continue;
        }
        const float a = cp::to_float(p[0]), b = cp::to_float(p[s_k]);
        const float c = cp::to_float(p[2 * s_k]), d = cp::to_float(p[3 * s_k]);
        float x1, y1, x2, y2;
        if (IN == 0) {
            x1 = a, y1 = b, x2 = c, y2 = d;
        } else if (IN == 1) {
            x1 = a, y1 = b, x2 = in_dtype<T>(__fadd_rn(a, c)), y2 = in_dtype<T>(__fadd_rn(b, d));
        } else {
            const float hw = in_dtype<T>(__fmul_rn(0.5f, c)), hh = in_dtype<T>(__fmul_rn(0.5f, d));
            x1 = in_dtype<T>(__fsub_rn(a, hw)), y1 = in_dtype<T>(__fsub_rn(b, hh));
            x2 = in_dtype<T>(__fadd_rn(a, hw)), y2 = in_dtype<T>(__fadd_rn(b, hh));
        }
        float o[4];
        if (OUT == 0) {
            o[0] = x1, o[1] = y1, o[2] = x2, o[3] = y2;
        } else {
            const float w = in_dtype<T>(__fsub_rn(x2, x1)), h = in_dtype<T>(__fsub_rn(y2, y1));
            if (OUT == 1) {
                o[0] = x1, o[1] = y1;
            } else {
                o[0] = in_dtype<T>(__fdiv_rn(in_dtype<T>(__fadd_rn(x1, x2)), 2.0f));
                o[1] = in_dtype<T>(__fdiv_rn(in_dtype<T>(__fadd_rn(y1, y2)), 2.0f));
            }
            o[2] = w, o[3] = h;
        }
#pragma unroll
        for (int k = 0; k < 4; ++k) q[k] = cp::from_float<T>(o[k]);
    }
}

// clip_boxes: x to [0, width], y to [0, height] with NumPy's maximum then minimum (NaN
// stays NaN); the bounds are rounded to the boxes' dtype (a float16 bound past 65504 is inf).
template <typename T>
__global__ void cupyprep_clip_boxes(const T* __restrict__ src, cp::i64 P, cp::i64 s_a, cp::i64 s_p,
                                    cp::i64 s_k, float width, float height, T* __restrict__ dst,
                                    cp::i64 rows) {
    const cp::i64 stride = (cp::i64)blockDim.x * gridDim.x;
    const float wb = in_dtype<T>(width), hb = in_dtype<T>(height);
    for (cp::i64 r = (cp::i64)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += stride) {
        const T* p = src + row_offset(r, P, s_a, s_p);
        T* q = dst + 4 * r;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            // the result is the value, 0 or the bound: exact in the boxes' dtype
            const float lo = np_maximum(cp::to_float(p[k * s_k]), 0.0f);
            q[k] = cp::from_float<T>(np_minimum(lo, (k & 1) ? hb : wb));
        }
    }
}

// box_iou: out[i, j] = inter / ((area_i + area_j) - inter) in float32, with
// area = (x2 - x1) * (y2 - y1), inter = w * h, w = fmax(fmin(x2) - fmax(x1), 0) (fmin /
// fmax ignore NaN, as NumPy's do); out is N x M, row-major. Each side float32 or float16.
template <typename TA, typename TB>
__global__ void cupyprep_box_iou(const TA* __restrict__ a, cp::i64 sa_r, cp::i64 sa_k,
                                 const TB* __restrict__ b, cp::i64 sb_r, cp::i64 sb_k, cp::i64 M,
                                 float* __restrict__ out, cp::i64 total) {
    const cp::i64 stride = (cp::i64)blockDim.x * gridDim.x;
    for (cp::i64 t = (cp::i64)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += stride) {
        const cp::i64 i = t / M, j = t - i * M;
        const TA* p = a + i * sa_r;
        const TB* q = b + j * sb_r;
        const float ax1 = cp::to_float(p[0]), ay1 = cp::to_float(p[sa_k]);
        const float ax2 = cp::to_float(p[2 * sa_k]), ay2 = cp::to_float(p[3 * sa_k]);
        const float bx1 = cp::to_float(q[0]), by1 = cp::to_float(q[sb_k]);
        const float bx2 = cp::to_float(q[2 * sb_k]), by2 = cp::to_float(q[3 * sb_k]);
        const float area_a = __fmul_rn(__fsub_rn(ax2, ax1), __fsub_rn(ay2, ay1));
        const float area_b = __fmul_rn(__fsub_rn(bx2, bx1), __fsub_rn(by2, by1));
        const float w = fmaxf(__fsub_rn(fminf(ax2, bx2), fmaxf(ax1, bx1)), 0.0f);
        const float h = fmaxf(__fsub_rn(fminf(ay2, by2), fmaxf(ay1, by1)), 0.0f);
        const float inter = __fmul_rn(w, h);
        out[t] = __fdiv_rn(inter, __fsub_rn(__fadd_rn(area_a, area_b), inter));
    }
}

// decode_boxes (SSD / RetinaFace): loc (A, P, 4) against priors (P, 4) cxcywh float32,
// contiguous -> xyxy float32: c = p_c + (l_c * v0) * p_wh, wh = p_wh * exp(l_wh * v1),
// x1y1 = c - wh / 2, x2y2 = x1y1 + wh.
template <typename T>
__global__ void cupyprep_decode_boxes(const T* __restrict__ loc, cp::i64 P, cp::i64 s_a, cp::i64 s_p,
                                      cp::i64 s_k, const float* __restrict__ priors, float v0,
                                      float v1, float* __restrict__ dst, cp::i64 rows) {
    const cp::i64 stride = (cp::i64)blockDim.x * gridDim.x;
    for (cp::i64 r = (cp::i64)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += stride) {
        const T* l = loc + row_offset(r, P, s_a, s_p);
        const float* pr = priors + 4 * (r % P);
        const float cx = __fadd_rn(pr[0], __fmul_rn(__fmul_rn(cp::to_float(l[0]), v0), pr[2]));
        const float cy = __fadd_rn(pr[1], __fmul_rn(__fmul_rn(cp::to_float(l[s_k]), v0), pr[3]));
        const float w = __fmul_rn(pr[2], expf(__fmul_rn(cp::to_float(l[2 * s_k]), v1)));
        const float h = __fmul_rn(pr[3], expf(__fmul_rn(cp::to_float(l[3 * s_k]), v1)));
        const float x1 = __fsub_rn(cx, __fdiv_rn(w, 2.0f)), y1 = __fsub_rn(cy, __fdiv_rn(h, 2.0f));
        float* q = dst + 4 * r;
        q[0] = x1;
        q[1] = y1;
        q[2] = __fadd_rn(x1, w);
        q[3] = __fadd_rn(y1, h);
    }
}

// decode_landmarks (RetinaFace): pre (A, P, 2L) -> points float32 (A, P, 2L), point values
// p_xy + (pre * v0) * p_wh; one thread per value.
template <typename T>
__global__ void cupyprep_decode_landmarks(const T* __restrict__ pre, cp::i64 P, cp::i64 K,
                                          cp::i64 s_a, cp::i64 s_p, cp::i64 s_k,
                                          const float* __restrict__ priors, float v0,
                                          float* __restrict__ dst, cp::i64 total) {
    const cp::i64 stride = (cp::i64)blockDim.x * gridDim.x;
    for (cp::i64 t = (cp::i64)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += stride) {
        const cp::i64 r = t / K, k = t - r * K;
        const float* pr = priors + 4 * (r % P) + (k & 1);
        const float v = cp::to_float(pre[row_offset(r, P, s_a, s_p) + k * s_k]);
        dst[t] = __fadd_rn(pr[0], __fmul_rn(__fmul_rn(v, v0), pr[2]));
    }
}

// decode_yolo: rows (A, N, K) of (cx, cy, w, h, [obj,] classes...) -> boxes (A, N, 4) xyxy
// and scores (A, N, C) float32, C = K - 4 - OBJ: x1 = cx - w * 0.5, x2 = cx + w * 0.5;
// scores cls * obj (OBJ) or cls. Two kernels, by the input's layout.
//
// Rows already contiguous along the row (YOLOv5's (A, N, K)): one warp per row, its lanes
// along the row (both the reads and the writes of a warp are consecutive).
template <typename T, bool OBJ>
__global__ void cupyprep_decode_yolo_rows(const T* __restrict__ pred, cp::i64 N, cp::i64 C,
                                          cp::i64 s_a, cp::i64 s_n, cp::i64 s_k,
                                          float* __restrict__ boxes, float* __restrict__ scores,
                                          cp::i64 rows) {
    const int lane = threadIdx.x & 31;
    const cp::i64 warps = ((cp::i64)blockDim.x * gridDim.x) >> 5;
    for (cp::i64 r = ((cp::i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < rows; r += warps) {
        const T* p = pred + row_offset(r, N, s_a, s_n);
        if (lane < 4) {
            const float c = cp::to_float(p[(lane & 1) * s_k]);
            const float half = __fmul_rn(cp::to_float(p[(2 + (lane & 1)) * s_k]), 0.5f);
            boxes[4 * r + lane] = lane < 2 ? __fsub_rn(c, half) : __fadd_rn(c, half);
        }
        const float obj = OBJ ? cp::to_float(p[4 * s_k]) : 1.0f;
        const T* cls = p + (4 + OBJ) * s_k;
        float* q = scores + r * C;
        for (cp::i64 c = lane; c < C; c += 32) {
            const float v = cp::to_float(cls[c * s_k]);
            q[c] = OBJ ? __fmul_rn(v, obj) : v;
        }
    }
}

// YOLOv8's output is (A, K, N), so its rows are a transposed view (a value's neighbours
// along the row are N apart) while the scores are written along the row: each block
// transposes a tile of kYoloRows rows x 32 columns through shared memory, read along the
// rows and written along the row. Grid: x row tiles, y 32-column tiles (the boxes come
// from tile 0), z images; blockDim 256.
namespace {
constexpr int kYoloRows = 128, kYoloCols = 32, kYoloThreads = 256;
}

template <typename T, bool OBJ>
__global__ void cupyprep_decode_yolo_tiles(const T* __restrict__ pred, cp::i64 A, cp::i64 N,
                                           cp::i64 C, cp::i64 s_a, cp::i64 s_n, cp::i64 s_k,
                                           float* __restrict__ boxes, float* __restrict__ scores) {
    __shared__ float tile[kYoloRows][kYoloCols + 1];  // [row][column]
    __shared__ float obj[kYoloRows];
    const int lid = threadIdx.x;
    const cp::i64 K = 4 + OBJ + C;
    const cp::i64 n0 = (cp::i64)blockIdx.x * kYoloRows, k0 = (cp::i64)blockIdx.y * kYoloCols;
    for (cp::i64 a = blockIdx.z; a < A; a += gridDim.z) {
        const T* img = pred + a * s_a;
#pragma unroll
        for (int u = lid; u < kYoloRows * kYoloCols; u += kYoloThreads) {
            const int ri = u % kYoloRows, ki = u / kYoloRows;
            const cp::i64 n = n0 + ri, k = k0 + ki;
            if (n < N && k < K) tile[ri][ki] = cp::to_float(img[n * s_n + k * s_k]);
        }
        if (OBJ) {
            for (int u = lid; u < kYoloRows && n0 + u < N; u += kYoloThreads)
                obj[u] = cp::to_float(img[(n0 + u) * s_n + 4 * s_k]);
        }
        __syncthreads();
        const cp::i64 row0 = a * N + n0;  // the tile's first row in the outputs
        if (blockIdx.y == 0) {  // the tile's boxes: 4 values a row, written in order
            for (int u = lid; u < 4 * kYoloRows && n0 + u / 4 < N; u += kYoloThreads) {
                const int ri = u / 4, q = u % 4;
                const float c = tile[ri][q & 1];
                const float half = __fmul_rn(tile[ri][2 + (q & 1)], 0.5f);
                boxes[4 * row0 + u] = q < 2 ? __fsub_rn(c, half) : __fadd_rn(c, half);
            }
        }
#pragma unroll
        for (int u = lid; u < kYoloRows * kYoloCols; u += kYoloThreads) {
            const int ri = u / kYoloCols, ci = u % kYoloCols;
            const cp::i64 c = k0 + ci - 4 - OBJ;  // the class of this column
            if (c >= 0 && c < C && n0 + ri < N) {
                const float v = tile[ri][ci];
                scores[(row0 + ri) * C + c] = OBJ ? __fmul_rn(v, obj[ri]) : v;
            }
        }
        __syncthreads();  // the tile is read before the next image's loads
    }
}

// PreprocessMeta's coordinate mapping (to_original / to_network) of (A, P, W) coordinates,
// W = 4 (xyxy) or 2 (xy): x values (even k) and y values (odd k) of a row of image n map
// as (c - add) / mul (INVERSE) or c * mul + add, then with CLIP to NumPy's
// minimum(maximum(v, 0), hi); each operation rounded on its own in T (float16: computed in
// float32 and rounded back, as NumPy's float16 arithmetic). Image n's six values (mul x,
// mul y, add x, add y, hi x, hi y), already rounded to T, come from `table` (N rows), or
// where it is NULL from `small`, passed by value (up to cp::kImagesByValue images: nothing to
// upload, and a CUDA graph keeps them). Row r's image is index[r] where `index` is given
// (an index outside [0, N) makes the row NaN), else image0 + r / P.
namespace {

template <typename T> struct Arith { typedef float type; };
template <> struct Arith<double> { typedef double type; };

template <typename T> __device__ __forceinline__ typename Arith<T>::type widen(T v) {
    return cp::to_float(v);
}
template <> __device__ __forceinline__ double widen<double>(double v) { return v; }

template <typename T> __device__ __forceinline__ T narrow(typename Arith<T>::type v) {
    return cp::from_float<T>(v);
}
template <> __device__ __forceinline__ double narrow<double>(double v) { return v; }

__device__ __forceinline__ float sub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double sub_rn(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ float div_rn(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ double div_rn(double a, double b) { return __ddiv_rn(a, b); }
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ double np_maximum(double a, double b) { return (a >= b || a != a) ? a : b; }
__device__ __forceinline__ double np_minimum(double a, double b) { return (a <= b || a != a) ? a : b; }

template <typename F> __device__ __forceinline__ F quiet_nan();
template <> __device__ __forceinline__ float quiet_nan<float>() { return __int_as_float(0x7FC00000); }
template <> __device__ __forceinline__ double quiet_nan<double>() {
    return __longlong_as_double(0x7FF8000000000000LL);
}

}  // namespace

template <typename T, int W, bool INVERSE, bool CLIP>
__global__ void cupyprep_map_coords(const T* __restrict__ src, cp::i64 P, cp::i64 s_a, cp::i64 s_p,
                                    cp::i64 s_k, const long long* __restrict__ index,
                                    cp::i64 image0, cp::i64 n_images, const T* __restrict__ table,
                                    const __grid_constant__
                                    cp::ByValue<T, cp::kImagesByValue * 6> small,
                                    T* __restrict__ dst, cp::i64 rows) {
    typedef typename Arith<T>::type F;
    const T* tab = table ? table : small.v;
    const cp::i64 stride = (cp::i64)blockDim.x * gridDim.x;
    for (cp::i64 r = (cp::i64)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += stride) {
        const T* p = src + row_offset(r, P, s_a, s_p);
        T* q = dst + W * r;
        const cp::i64 n = index ? (cp::i64)index[r] : image0 + r / P;
        if (n < 0 || n >= n_images) {
#pragma unroll
            for (int k = 0; k < W; ++k) q[k] = narrow<T>(quiet_nan<F>());
            continue;
        }
        const T* m = tab + 6 * n;
#pragma unroll
        for (int k = 0; k < W; ++k) {
            const F mul = widen(m[k & 1]), add = widen(m[2 + (k & 1)]);
            const F c = widen(p[k * s_k]);
            F v = INVERSE ? in_dtype<T>(div_rn(in_dtype<T>(sub_rn(c, add)), mul))
                          : in_dtype<T>(add_rn(in_dtype<T>(mul_rn(c, mul)), add));
            if (CLIP) v = np_minimum(np_maximum(v, (F)0), widen(m[4 + (k & 1)]));
            q[k] = narrow<T>(v);
        }
    }
}
