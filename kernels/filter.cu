// Separable filters with OpenCV's semantics: cupyprep_filter_<kind><T, CN, BORDER>.
//
// gaussian: cv2.GaussianBlur. Each output sums, over the kh rows of its window, wy[i] times
// that row's sum of wx[j] * pixel over kw columns: the row pass and then the column pass of
// OpenCV's separable filter, computed per output (no intermediate image; neighbouring
// threads read the same pixels from cache). uint8 and uint16 are OpenCV's fixed point
// (GaussianBlurFixedPoint): integer weights with B = 8 / 16 fractional bits summing to
// 2^B, the row sums exact, the output (sum + 2^(2B-1)) >> 2B, saturated. float32 / float16
// sum float32 products in tap order (fused multiply-adds, as OpenCV's vector code), float16
// rounded once at the end.
// box: cv2.boxFilter (ddepth -1): the window's sum (exact: integers in 64 bits, floats in
// double, as OpenCV sums them), then with `normalize`: uint8 with an area of at most 256
// OpenCV's ((sum + dd) * ds) >> 23, larger areas and uint16 rint(float32(sum) * float32(1 /
// area)) (OpenCV's vector code; its scalar code at the two ends of a row rounds in double
// and can differ by 1 where the quotient is within float32 rounding of a half), floats
// (float)(sum * (1 / area)) in double.
//
// The window of output (y, x) starts at (y - ay, x - ax); taps outside the image follow
// BORDER (OpenCV's borderInterpolate; constant: zero, the tap skipped). One thread per
// output pixel and CN channels (planar or wide images one plane per group, as resize.cu).
// Grid: x across blocks and threads, a row per blockIdx.y, an (image, group) pair per
// blockIdx.z; loops cover sizes past the grid's limits.
#include "common.cuh"

namespace {

// The borders (cupyprep/_specs/filter.py BORDERS).
constexpr int CONSTANT = 0, REPLICATE = 1, REFLECT = 2, REFLECT101 = 3;

// OpenCV's borderInterpolate (the periodic forms in closed form); -1 for a constant border.
template <int BORDER>
__device__ __forceinline__ int filter_border(int p, int len) {
    if ((unsigned)p < (unsigned)len) return p;
    if (BORDER == CONSTANT) return -1;
    if (BORDER == REPLICATE || len == 1) return p < 0 ? 0 : len - 1;
    const int period = BORDER == REFLECT ? 2 * len : 2 * len - 2;
    int q = p % period;
    if (q < 0) q += period;
    if (BORDER == REFLECT) return q < len ? q : period - 1 - q;
    return q < len ? q : period - q;
}

// Sums of the fixed-point Gaussian (uint8: row sums fit 32 bits, totals too; uint16: the
// totals need 64), of the box (64-bit integers, double), and of the float Gaussian.
template <typename T> struct FixedSum { typedef unsigned int type; };
template <> struct FixedSum<unsigned short> { typedef unsigned long long type; };
template <typename T> struct BoxSum { typedef long long type; };
template <> struct BoxSum<float> { typedef double type; };
template <> struct BoxSum<cp_half> { typedef double type; };

// The window of output (y, x), row by row: begin() before window row i's taps, tap(j, p)
// for each of its taps (p: the tap's pixel; taps outside the image follow BORDER, a
// constant border's skipped), end(i) after them; rows outside a constant border skipped.
template <int BORDER, typename T, typename Begin, typename Tap, typename End>
__device__ __forceinline__ void filter_window(const T* img, int y, int x, int h, int w, cp::i64 s_y,
                                              cp::i64 s_x, int kh, int kw, int ay, int ax, Begin begin,
                                              Tap tap, End end) {
    for (int i = 0; i < kh; ++i) {
        const int yy = filter_border<BORDER>(y - ay + i, h);
        if (yy < 0) continue;
        const T* row = img + (cp::i64)yy * s_y;
        begin();
        for (int j = 0; j < kw; ++j) {
            const int xx = filter_border<BORDER>(x - ax + j, w);
            if (xx < 0) continue;
            tap(j, row + (cp::i64)xx * s_x);
        }
        end(i);
    }
}

__device__ __forceinline__ double box_value(long long s) { return (double)s; }
__device__ __forceinline__ double box_value(double s) { return s; }

}  // namespace

#define CUPYPREP_FILTER_PARAMS                                                                 \
    const T* __restrict__ src, T* __restrict__ dst, int groups, int h, int w, cp::i64 s_n,     \
        cp::i64 s_g, cp::i64 s_y, cp::i64 s_x, cp::i64 s_c, cp::i64 d_n, cp::i64 d_g,          \
        cp::i64 d_y, cp::i64 d_x, cp::i64 d_c, int kh, int kw, int ay, int ax, int planes

#define CUPYPREP_FILTER_BEGIN                                                              \
    for (int plane = blockIdx.z; plane < planes; plane += gridDim.z) {                     \
        const int n_ = plane / groups, grp_ = plane - n_ * groups;                         \
        const T* img = src + n_ * s_n + grp_ * s_g;                                        \
        const cp::i64 db0 = n_ * d_n + grp_ * d_g;                                         \
        for (int y = blockIdx.y; y < h; y += gridDim.y)                                    \
            for (int x = blockIdx.x * blockDim.x + threadIdx.x; x < w;                     \
                 x += gridDim.x * blockDim.x) {                                            \
                T* q = dst + db0 + (cp::i64)y * d_y + (cp::i64)x * d_x;
#define CUPYPREP_FILTER_END \
    }                       \
    }

// Gaussian: `wfix` (kw then kh integer weights, uint8 / uint16) or `wflt` (float32), the
// other null; `bits` the fixed point's fractional bits.
template <typename T, int CN, int BORDER>
__global__ void cupyprep_filter_gaussian(CUPYPREP_FILTER_PARAMS, const int* __restrict__ wfix,
                                         const float* __restrict__ wflt, int bits) {
    CUPYPREP_FILTER_BEGIN
    if constexpr (cp::is_integer<T>::value) {
        typedef typename FixedSum<T>::type S;
        S acc[CN];
#pragma unroll
        for (int c = 0; c < CN; ++c) acc[c] = 0;
        unsigned int rs[CN];
        filter_window<BORDER>(
            img, y, x, h, w, s_y, s_x, kh, kw, ay, ax,
            [&] {
#pragma unroll
                for (int c = 0; c < CN; ++c) rs[c] = 0;
            },
            [&](int j, const T* p) {
                const unsigned int wj = (unsigned int)wfix[j];
#pragma unroll
                for (int c = 0; c < CN; ++c) rs[c] += wj * (unsigned int)p[c * s_c];
            },
            [&](int i) {
                const S wi = (S)(unsigned int)wfix[kw + i];
#pragma unroll
                for (int c = 0; c < CN; ++c) acc[c] += wi * (S)rs[c];
            });
        const S half = (S)1 << (2 * bits - 1);
        const S top = cp::is_integer<T>::value && sizeof(T) == 1 ? 255 : 65535;
#pragma unroll
        for (int c = 0; c < CN; ++c) {
            const S v = (acc[c] + half) >> (2 * bits);
            q[c * d_c] = (T)(v > top ? top : v);
        }
    } else {
        float acc[CN];
#pragma unroll
        for (int c = 0; c < CN; ++c) acc[c] = 0.f;
        float rs[CN];
        filter_window<BORDER>(
            img, y, x, h, w, s_y, s_x, kh, kw, ay, ax,
            [&] {
#pragma unroll
                for (int c = 0; c < CN; ++c) rs[c] = 0.f;
            },
            [&](int j, const T* p) {
#pragma unroll
                for (int c = 0; c < CN; ++c) rs[c] = __fmaf_rn(wflt[j], cp::to_float(p[c * s_c]), rs[c]);
            },
            [&](int i) {
#pragma unroll
                for (int c = 0; c < CN; ++c) acc[c] = __fmaf_rn(wflt[kw + i], rs[c], acc[c]);
            });
#pragma unroll
        for (int c = 0; c < CN; ++c) q[c * d_c] = cp::from_float<T>(acc[c]);
    }
    CUPYPREP_FILTER_END
}

// Box: `normalize` 0 or 1; uint8's fixed-point divisor (ds, dd) for areas of at most 256,
// `inv_area` = float32(1 / area) and `inv_area_d` = 1 / area for the others.
template <typename T, int CN, int BORDER>
__global__ void cupyprep_filter_box(CUPYPREP_FILTER_PARAMS, int normalize, int ds, int dd,
                                    float inv_area, double inv_area_d) {
    CUPYPREP_FILTER_BEGIN
    typedef typename BoxSum<T>::type S;
    S acc[CN];
#pragma unroll
    for (int c = 0; c < CN; ++c) acc[c] = 0;
    filter_window<BORDER>(
        img, y, x, h, w, s_y, s_x, kh, kw, ay, ax, [] {},
        [&](int, const T* p) {
#pragma unroll
            for (int c = 0; c < CN; ++c) {
                if constexpr (cp::is_integer<T>::value)
                    acc[c] += (S)p[c * s_c];
                else
                    acc[c] = __dadd_rn(acc[c], (double)cp::to_float(p[c * s_c]));
            }
        },
        [](int) {});
#pragma unroll
    for (int c = 0; c < CN; ++c) {
        if constexpr (cp::is_integer<T>::value) {
            const long long top = sizeof(T) == 1 ? 255 : 65535;
            long long v;
            if (!normalize) {
                v = (long long)acc[c];
            } else if (ds > 0) {  // uint8, area <= 256
                v = (long long)((((unsigned long long)acc[c] + dd) * (unsigned long long)ds) >> 23);
            } else {
                v = (long long)__float2int_rn(__fmul_rn((float)acc[c], inv_area));
            }
            q[c * d_c] = (T)(v < 0 ? 0 : (v > top ? top : v));
        } else {
            const double s = box_value(acc[c]);
            q[c * d_c] = cp::from_float<T>(__double2float_rn(normalize ? __dmul_rn(s, inv_area_d) : s));
        }
    }
    CUPYPREP_FILTER_END
}
