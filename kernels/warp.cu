// Affine and perspective warps with cv2.warpAffine / cv2.warpPerspective semantics:
// cupyprep_warp_<affine|perspective>_<interpolation><T, CN>.
//
// Every kernel reads `mats`: per output image, the matrix that maps destination pixels to
// source pixels (the host inverts src->dst matrices in double, as OpenCV does), 6 or 9
// doubles, `mat_step` apart (0: one matrix for the whole batch); where `mats` is NULL, the
// one matrix `mat_value` passed by value (a host matrix: nothing to upload, and a CUDA
// graph that captures the launch keeps its values). Output image i samples
// source image `src_index[i]` (NULL: image i). Sources are one strided batch (`src`, one
// geometry) or, where `src` is NULL, a ragged list: up to cp::kImagesByValue image records
// by value (`src_list`), or a longer list's records in `src_table`.
// One thread per destination pixel (all CN channels), or, for nearest, linear and cubic,
// per PX pixels side by side in a row. Grid: x across blocks and threads, blockIdx.y a
// group of rows_per_block rows (times blockDim.y for nearest, linear and cubic, whose
// blocks may be 2-D), blockIdx.z an output image (loops cover sizes past the grid's
// limits); each thread sets up its image (matrix, geometry) once.
//
// Nearest, linear and cubic also take DENSE: source and destination pixels are CN
// adjacent elements (s_x == d_x == CN, s_c == d_c == 1, in every source of a list; row and
// image strides stay free), so those strides are compile-time constants, and a thread's PX
// pixels are stored as whole words where aligned (uint8: 32- or 16-bit words; the other
// types: 16- or 8-byte words). DENSE uint8 nearest and linear with 1, 3 or 4 channels read
// each interior tap pair as the aligned 32-bit words that cover its 2 * CN bytes; the other
// types read 8- and 16-byte pixels as one word where the image's start and row stride are
// aligned to it, a linear tap pair of 2-byte elements as the 32-bit words that cover it and
// one of float32 (3 channels) as aligned 8-byte words. In a dense kernel, pixels that need
// border logic wait until the thread's group is stored and are then made one at a time (a
// small unrolled loop for the instruction cache). Only the memory access changes: every
// pixel's arithmetic is the same in every variant (nearest copies elements, converting
// only 2-byte ones to float and back).
//
// OpenCV has two implementations, and picks by channel count and interpolation; each is
// reproduced step by step, as a family of kernels here:
//
// "nearest", "linear" (OpenCV's float warp kernels: 1, 3 or 4 channels):
//   M is rounded to float32. Source coordinates are float32: within its SIMD body (x below
//   `body_end`, the destination width rounded down to OpenCV's 16-pixel vector step on AVX2)
//   sx = fma(M0, x, float(y*M1 + M2)) (the row term unfused); in its scalar tail the
//   compiler contracts x*M0 + y*M1 + M2 to fma(x, M0, y*M1) + M2. Perspective divides by
//   w computed the same way. Linear: ix = floor(sx), a = sx - ix, then
//   v0 = fma(a, p01 - p00, p00), v1 = fma(a, p11 - p10, p10), v = fma(b, v1 - v0, v0),
//   rounded half to even and saturated. Nearest: ix = rint(sx) (half to even).
//
// "cubic": the float coordinates above, the SIMD body's formula for every x (OpenCV's cubic
// warp has no scalar tail; body_end is not read), Keys' weights (A = -0.75) at the exact
// fraction.
//
// "nearest_fixed", "linear_fixed" (OpenCV's older remap path, which it keeps for 2
// channels): coordinates in double, quantized to 1/32 pixel
// (affine: AB_BITS = 10 fixed point per row plus a rounded per-column term; perspective:
// 32 / w), then remap with initInterTab2D's 32x32 weight tables (`itab` int16 weights
// summing to 1 << 15 for uint8, `ftab` float32 otherwise), summed in OpenCV's order.
//
// Border (runtime `border`, reached only by taps outside the image): 0 constant,
// 1 replicate, 2 reflect, 3 reflect101, 4 wrap; constant taps take bval[c].

// sampling.cuh brings common.cuh and the cubic weights resize uses
#include "sampling.cuh"

namespace {

enum { CONSTANT = 0, REPLICATE = 1, REFLECT = 2, REFLECT101 = 3, WRAP = 4 };

// A source tap index outside [0, len): OpenCV's borderInterpolate (periodic forms in
// closed form, so far-away coordinates cost no loop); -1 for a constant border.
// A one-pixel axis replicates, as OpenCV's warps make it.
__device__ __forceinline__ int border_index(int p, int len, int border) {
    if ((unsigned)p < (unsigned)len) return p;
    if (border == CONSTANT) return -1;
    if (border == REPLICATE || len == 1) return p < 0 ? 0 : len - 1;
    if (border == WRAP) {
        int q = p % len;
        return q < 0 ? q + len : q;
    }
    const int period = border == REFLECT ? 2 * len : 2 * len - 2;
    int q = p % period;
    if (q < 0) q += period;
    if (border == REFLECT) return q < len ? q : period - 1 - q;
    return q < len ? q : period - q;
}

struct Image {
    const void* base;
    int h, w;
    cp::i64 s_y, s_x, s_c;
};

// Far-away and non-finite coordinates land here, well outside any image, so integer
// arithmetic on them cannot overflow.
constexpr float kFar = 1073741824.f;  // 2^30

__device__ __forceinline__ float tame(float v) {
    return v != v ? -kFar : fminf(fmaxf(v, -kFar), kFar);
}

}  // namespace

#define CUPYPREP_WARP_PARAMS                                                               \
    const T* __restrict__ src, const cp::RaggedImage* __restrict__ src_table,              \
        const __grid_constant__ cp::ByValue<cp::RaggedImage, cp::kImagesByValue> src_list, \
        int sh, int sw, cp::i64 s_n, cp::i64 s_y, cp::i64 s_x, cp::i64 s_c,                \
        const int* __restrict__ src_index, const double* __restrict__ mats, cp::i64 mat_step, \
        const __grid_constant__ cp::ByValue<double, 9> mat_value, T* __restrict__ dst, int dh, \
        int dw, cp::i64 d_n, cp::i64 d_y, cp::i64 d_x, cp::i64 d_c, int border, float bv0, \
        float bv1, float bv2, float bv3, int body_end, const short* __restrict__ itab,     \
        const float* __restrict__ ftab, int n_out, int rows_per_block

namespace {

// Where one output pixel comes from: its source image and inverse matrix (as doubles for
// the fixed-point path, rounded to float32 for the float one), and where it goes.
template <typename T>
struct Item {
    const T* img;
    int h, w;
    cp::i64 s_y, s_x, s_c;
    const double* m;
    float mf[9];
    T* out;
    int x, y;
    bool words;  // DENSE, 8- or 16-byte pixels: read as whole words (pixel_words)
};

// The per-image part of an Item, set up once per output image.
template <typename T>
__device__ __forceinline__ Item<T> image_item(int n, const T* src,
                                              bool list, const cp::RaggedImage* src_table,
                                              const cp::RaggedImage* src_list,
                                              int sh, int sw, cp::i64 s_n, cp::i64 s_y,
                                              cp::i64 s_x, cp::i64 s_c, const int* src_index,
                                              const double* mats, cp::i64 mat_step,
                                              const double* mat_value) {
    Item<T> it;
    const cp::i64 k = src_index ? (cp::i64)src_index[n] : n;
    if (list) {
        const cp::RaggedImage& r = src_table ? src_table[k] : src_list[k];
        it.img = reinterpret_cast<const T*>(r.ptr);
        it.h = r.h;
        it.w = r.w;
        it.s_y = r.s_y;
        it.s_x = r.s_x;
        it.s_c = r.s_c;
    } else {
        it.img = src + k * s_n;
        it.h = sh;
        it.w = sw;
        it.s_y = s_y;
        it.s_x = s_x;
        it.s_c = s_c;
    }
    it.m = mats ? mats + (cp::i64)n * mat_step : mat_value;
#pragma unroll
    for (int j = 0; j < 9; ++j) it.mf[j] = 0.f;
    it.out = nullptr;
    it.x = it.y = 0;
    it.words = false;
    return it;
}

template <typename T, int CN>
__device__ __forceinline__ void fill(T* out, cp::i64 d_c, const float (&bval)[4]) {
#pragma unroll
    for (int c = 0; c < CN; ++c) out[c * d_c] = cp::from_float<T>(bval[c]);
}

// OpenCV's float warp coordinates (see the file comment).
template <bool PERSPECTIVE>
__device__ __forceinline__ void float_coords(const float (&m)[9], int x, int y, bool body,
                                             float& sx, float& sy) {
    const float fx = (float)x, fy = (float)y;
    float X, Y, W = 1.f;
    if (body) {
        X = __fmaf_rn(m[0], fx, __fadd_rn(__fmul_rn(fy, m[1]), m[2]));
        Y = __fmaf_rn(m[3], fx, __fadd_rn(__fmul_rn(fy, m[4]), m[5]));
        if (PERSPECTIVE) W = __fmaf_rn(m[6], fx, __fadd_rn(__fmul_rn(fy, m[7]), m[8]));
    } else {
        X = __fadd_rn(__fmaf_rn(fx, m[0], __fmul_rn(fy, m[1])), m[2]);
        Y = __fadd_rn(__fmaf_rn(fx, m[3], __fmul_rn(fy, m[4])), m[5]);
        if (PERSPECTIVE) W = __fadd_rn(__fmaf_rn(fx, m[6], __fmul_rn(fy, m[7])), m[8]);
    }
    if (PERSPECTIVE) {
        X = __fdiv_rn(X, W);
        Y = __fdiv_rn(Y, W);
    }
    sx = X;
    sy = Y;
}

// Source elements through the read-only data cache. The compiler infers that from
// __restrict__ by itself, but no longer once the kernel looks at an address's bits (the
// dense variants' alignment checks), so every source load says it.
template <typename T>
__device__ __forceinline__ float load_float(const T* p) {
    return cp::to_float(__ldg(p));
}
template <>
__device__ __forceinline__ float load_float<cp_half>(const cp_half* p) {
    cp_half h;
    h.bits = __ldg(&p->bits);
    return cp::to_float(h);
}

// --- word reads of dense sources ------------------------------------------------------
using cp::kTwo23;
using cp::kTwo23Bits;

// Byte k of the 8 bytes (lo, hi) as the float 2^23 + byte.
__device__ __forceinline__ float biased(unsigned lo, unsigned hi, int k) {
    return __uint_as_float(__byte_perm(k < 4 ? lo : hi, kTwo23Bits, 0x7440u + (k & 3)));
}

// The 4 * N bytes at p (any alignment) as N 32-bit words, from the aligned words that
// cover them: those reach back at most 3 bytes (to the word holding p, in the same
// allocation) and, where p is not aligned, up to 3 bytes past the last.
template <int N>
__device__ __forceinline__ void row_words(const unsigned char* p, unsigned (&b)[N]) {
    const unsigned long long a = (unsigned long long)p;
    const unsigned* w = reinterpret_cast<const unsigned*>(a & ~3ull);
    const unsigned shift = (unsigned)(a & 3u) * 8;
    unsigned x[N + 1];
#pragma unroll
    for (int k = 0; k < N; ++k) x[k] = __ldg(w + k);
    x[N] = shift ? __ldg(w + N) : 0u;
#pragma unroll
    for (int k = 0; k < N; ++k) b[k] = __funnelshift_r(x[k], x[k + 1], shift);
}

// The 4 * N bytes at p (any alignment) as N 32-bit words, from the aligned 8-byte words that
// cover them: those start up to 7 bytes before p (in the 8-byte word holding it, in the
// same allocation) and, the last loaded only where the bytes reach it, end up to 7 bytes
// past them. A warp issues fewer loads than with row_words (4 for 24 bytes, where
// row_words issues 6 and a seventh for the lanes off a word), for two selects per word.
template <int N>
__device__ __forceinline__ void row_words64(const unsigned char* p, unsigned (&b)[N]) {
    const unsigned long long a = (unsigned long long)p;
    const uint2* w = reinterpret_cast<const uint2*>(a & ~7ull);
    const unsigned d = (unsigned)(a & 7u);
    constexpr int kLoads = (4 * N + 7 + 7) / 8;  // the 8-byte words d + 4N bytes can touch
    unsigned y[2 * kLoads];
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
        const bool need = 8 * j < 4 * N || 8u * j < d + 4u * N;  // starts before the end
        const uint2 u = need ? __ldg(w + j) : make_uint2(0u, 0u);
        y[2 * j] = u.x;
        y[2 * j + 1] = u.y;
    }
    const bool odd = d >= 4u;
    const unsigned shift = (d & 3u) * 8;
#pragma unroll
    for (int k = 0; k < N; ++k)
        b[k] = __funnelshift_r(odd ? y[k + 1] : y[k], odd ? y[k + 2] : y[k + 1], shift);
}

// The N 32-bit elements at p (4-byte aligned; N even) as N / 2 aligned 8-byte loads: where
// p is not 8-byte aligned those start 4 bytes before p (in the 8-byte word holding it) and
// the last element comes as one more 4-byte load, so nothing past the N elements is read.
template <int N>
__device__ __forceinline__ void row_words8(const void* p, unsigned (&b)[N]) {
    const unsigned long long a = (unsigned long long)p;
    const uint2* w = reinterpret_cast<const uint2*>(a & ~7ull);
    const bool odd = (a & 4u) != 0;
    unsigned x[N + 1];
#pragma unroll
    for (int k = 0; k < N / 2; ++k) {
        const uint2 u = __ldg(w + k);
        x[2 * k] = u.x, x[2 * k + 1] = u.y;
    }
    x[N] = odd ? __ldg(reinterpret_cast<const unsigned*>(w + N / 2)) : 0u;
#pragma unroll
    for (int k = 0; k < N; ++k) b[k] = odd ? x[k + 1] : x[k];
}

// A 16-bit element's float from its bits.
__device__ __forceinline__ float element_from_bits(unsigned bits, cp_half) {
    return cp::to_float(cp_half{(unsigned short)bits});
}
__device__ __forceinline__ float element_from_bits(unsigned bits, unsigned short) {
    return __fsub_rn(__uint_as_float(kTwo23Bits | bits), kTwo23);
}

// Element e of the elements packed in words b, as its exact float (integers through the
// bit pattern 2^23 + v, no conversion instruction).
template <typename T, int N>
__device__ __forceinline__ float word_element(const unsigned (&b)[N], int e) {
    if constexpr (sizeof(T) == 1)
        return __fsub_rn(biased(b[e / 4], 0u, e & 3), kTwo23);  // byte e & 3 of word e / 4
    else if constexpr (sizeof(T) == 2)
        return element_from_bits((b[e / 2] >> (16 * (e & 1))) & 0xFFFFu, T{});
    else
        return __uint_as_float(b[e]);
}

// A source's pixel and channel strides: compile-time constants for DENSE pixels.
template <bool DENSE, int CN, typename T>
__device__ __forceinline__ cp::i64 pixel_step(const Item<T>& it) {
    return DENSE ? (cp::i64)CN : it.s_x;
}
template <bool DENSE, typename T>
__device__ __forceinline__ cp::i64 channel_step(const Item<T>& it) {
    return DENSE ? (cp::i64)1 : it.s_c;
}

// Dense pixels of 8 or 16 bytes (4 channels of 2-byte elements, 2 or 4 of float32) go as
// one aligned 8- or 16-byte word where the image's first pixel and row stride are
// multiples of the pixel's size (Item::words, set per image), so that every pixel is.
template <typename T, int CN>
struct pixel_words {
    static constexpr int kBytes = CN * (int)sizeof(T);
    static constexpr bool value = kBytes == 8 || kBytes == 16;
    __device__ __forceinline__ static bool aligned(const T* img, cp::i64 s_y) {
        return (((unsigned long long)img | (unsigned long long)s_y * sizeof(T)) & (kBytes - 1)) == 0;
    }
    // the pixel at q (aligned) as its 32-bit words
    __device__ __forceinline__ static void load(const T* q, unsigned (&b)[value ? kBytes / 4 : 1]) {
        if constexpr (kBytes == 16) {
            const uint4 u = __ldg(reinterpret_cast<const uint4*>(q));
            b[0] = u.x, b[1] = u.y, b[2] = u.z, b[3] = u.w;
        } else {
            const uint2 u = __ldg(reinterpret_cast<const uint2*>(q));
            b[0] = u.x, b[1] = u.y;
        }
    }
};

// The CN elements of the pixel at q, inside the image.
template <typename T, int CN, bool DENSE>
__device__ __forceinline__ void load_pixel(const Item<T>& it, const T* q, float (&p)[CN]) {
    if constexpr (DENSE && pixel_words<T, CN>::value) {
        if (it.words) {
            unsigned b[pixel_words<T, CN>::kBytes / 4];
            pixel_words<T, CN>::load(q, b);
#pragma unroll
            for (int c = 0; c < CN; ++c) p[c] = word_element<T>(b, c);
            return;
        }
    }
    const cp::i64 s_c = channel_step<DENSE>(it);
#pragma unroll
    for (int c = 0; c < CN; ++c) p[c] = load_float(q + c * s_c);
}

// The pixel at q, inside the image, as its elements: nearest copies bytes without a round
// trip through float (uint8 nearest 2-5% faster on W5's rotations); 2-byte ones keep it
// (copied, 3-channel uint16 and float16 measured 17% slower), and float32's is exact.
template <typename T, int CN, bool DENSE>
__device__ __forceinline__ void copy_pixel(const Item<T>& it, const T* q, T (&v)[CN]) {
    if constexpr (sizeof(T) == 1) {
        const cp::i64 s_c = channel_step<DENSE>(it);
#pragma unroll
        for (int c = 0; c < CN; ++c) v[c] = __ldg(q + c * s_c);
    } else {
        float p[CN];
        load_pixel<T, CN, DENSE>(it, q, p);
#pragma unroll
        for (int c = 0; c < CN; ++c) v[c] = cp::from_float<T>(p[c]);
    }
}

template <typename T, int CN, bool DENSE = false>
__device__ __forceinline__ void tap(const Item<T>& it, int ix, int iy, int border,
                                    const float (&bval)[4], float (&p)[CN]) {
    const cp::i64 s_x = pixel_step<DENSE, CN>(it);
    if ((unsigned)ix < (unsigned)it.w && (unsigned)iy < (unsigned)it.h) {
        load_pixel<T, CN, DENSE>(it, it.img + (cp::i64)iy * it.s_y + (cp::i64)ix * s_x, p);
        return;
    }
    const int bx = border_index(ix, it.w, border), by = border_index(iy, it.h, border);
    if (bx < 0 || by < 0) {
#pragma unroll
        for (int c = 0; c < CN; ++c) p[c] = bval[c];
        return;
    }
    load_pixel<T, CN, DENSE>(it, it.img + (cp::i64)by * it.s_y + (cp::i64)bx * s_x, p);
}

// How row_pair reads a row's tap pair (ix, ix + 1) that is not two whole-word pixels: dense
// 2-byte elements as the aligned 32-bit words that cover the pair's 4 * CN bytes (kWords32),
// which reach one element past its end where it starts off a word (kReach pixels; a
// whole-word pixel reaches nowhere, but takes the same bound); float32 of more than one
// channel as row_words8 (kWords64), which stays within (one channel: two 4-byte loads
// measured faster); anything else element by element.
template <typename T, int CN, bool DENSE>
struct pair_read {
    static constexpr bool kWords32 = DENSE && sizeof(T) == 2;
    static constexpr bool kWords64 = DENSE && sizeof(T) == 4 && CN > 1;
    static constexpr int kReach = kWords32 ? 1 : 0;
};

// Taps ix and ix + 1 of one source row, inside the image with pair_read's kReach pixels
// after them.
template <typename T, int CN, bool DENSE>
__device__ __forceinline__ void row_pair(const Item<T>& it, const T* row, int ix,
                                         float (&a)[CN], float (&b)[CN]) {
    const cp::i64 s_x = pixel_step<DENSE, CN>(it);
    const T* q = row + (cp::i64)ix * s_x;
    if constexpr (DENSE && pixel_words<T, CN>::value) {
        if (it.words) {
            load_pixel<T, CN, DENSE>(it, q, a);
            load_pixel<T, CN, DENSE>(it, q + s_x, b);
            return;
        }
    }
    using read = pair_read<T, CN, DENSE>;
    if constexpr (read::kWords32 || read::kWords64) {
        unsigned w[read::kWords64 ? 2 * CN : CN];  // the pair's 2 * CN elements
        if constexpr (read::kWords64)
            row_words8<2 * CN>(q, w);
        else
            row_words<CN>(reinterpret_cast<const unsigned char*>(q), w);
#pragma unroll
        for (int c = 0; c < CN; ++c) {
            a[c] = word_element<T>(w, c);
            b[c] = word_element<T>(w, CN + c);
        }
        return;
    }
    const cp::i64 s_c = channel_step<DENSE>(it);
#pragma unroll
    for (int c = 0; c < CN; ++c) {
        a[c] = load_float(q + c * s_c);
        b[c] = load_float(q + s_x + c * s_c);
    }
}

// Nearest's source pixel for output pixel (x, y): the float coordinates (tamed), rounded
// half to even.
template <bool PERSPECTIVE>
__device__ __forceinline__ void nearest_cell(const float (&m)[9], int x, int y, bool body,
                                             int& ix, int& iy) {
    float sx, sy;
    float_coords<PERSPECTIVE>(m, x, y, body, sx, sy);
    ix = __float2int_rn(tame(sx));
    iy = __float2int_rn(tame(sy));
}

// Nearest and linear make one pixel's CN values into v (stored by the caller);
// `border_fill` holds the border value as T.
template <typename T, int CN, bool PERSPECTIVE, bool DENSE>
__device__ __forceinline__ void warp_nearest(const Item<T>& it, int x, int y, int border,
                                             const float (&)[4], const T (&border_fill)[CN],
                                             int body_end, T (&v)[CN]) {
    int ix, iy;
    nearest_cell<PERSPECTIVE>(it.mf, x, y, x < body_end, ix, iy);
    if ((unsigned)ix >= (unsigned)it.w || (unsigned)iy >= (unsigned)it.h) {
        if (border == CONSTANT) {
#pragma unroll
            for (int c = 0; c < CN; ++c) v[c] = border_fill[c];
            return;
        }
        ix = border_index(ix, it.w, border);  // never -1 for the other borders
        iy = border_index(iy, it.h, border);
    }
    copy_pixel<T, CN, DENSE>(it, it.img + (cp::i64)iy * it.s_y + (cp::i64)ix * pixel_step<DENSE, CN>(it), v);
}

// Linear's source cell for output pixel (x, y): the float coordinates (tamed), their
// floors (ix, iy) and the fractions a = sx - ix, b = sy - iy.
template <bool PERSPECTIVE>
__device__ __forceinline__ void linear_cell(const float (&m)[9], int x, int y, bool body,
                                            int& ix, int& iy, float& a, float& b) {
    float sx, sy;
    float_coords<PERSPECTIVE>(m, x, y, body, sx, sy);
    sx = tame(sx);
    sy = tame(sy);
    ix = __float2int_rd(sx);
    iy = __float2int_rd(sy);
    a = __fsub_rn(sx, (float)ix);
    b = __fsub_rn(sy, (float)iy);
}

// Linear, constant border: whether every tap of cell (ix, iy) lies outside the image (the
// pixel is then the border value itself).
template <typename T>
__device__ __forceinline__ bool linear_outside(const Item<T>& it, int ix, int iy) {
    return (unsigned)(ix + 1) >= (unsigned)(it.w + 1) || (unsigned)(iy + 1) >= (unsigned)(it.h + 1);
}

// Whether all four taps of cell (ix, iy) lie inside the image, with the pixels row_pair's
// reads reach past them: linear_taps then needs no border logic (most pixels of a warp).
template <typename T, int CN, bool DENSE>
__device__ __forceinline__ bool linear_inside(const Item<T>& it, int ix, int iy) {
    constexpr int kReach = pair_read<T, CN, DENSE>::kReach;
    return (unsigned)ix < (unsigned)(kReach ? max(it.w - 1 - kReach, 0) : it.w - 1) &&
           (unsigned)iy < (unsigned)(it.h - 1);
}

template <typename T, int CN, bool DENSE>
__device__ __forceinline__ void linear_taps(const Item<T>& it, int ix, int iy, float (&p00)[CN],
                                            float (&p01)[CN], float (&p10)[CN],
                                            float (&p11)[CN]) {
    const T* r0 = it.img + (cp::i64)iy * it.s_y;
    row_pair<T, CN, DENSE>(it, r0, ix, p00, p01);
    row_pair<T, CN, DENSE>(it, r0 + it.s_y, ix, p10, p11);
}

template <typename T, int CN>
__device__ __forceinline__ void linear_mix(float a, float b, const float (&p00)[CN],
                                           const float (&p01)[CN], const float (&p10)[CN],
                                           const float (&p11)[CN], T (&v)[CN]) {
#pragma unroll
    for (int c = 0; c < CN; ++c) {
        const float v0 = __fmaf_rn(a, __fsub_rn(p01[c], p00[c]), p00[c]);
        const float v1 = __fmaf_rn(a, __fsub_rn(p11[c], p10[c]), p10[c]);
        v[c] = cp::from_float<T>(__fmaf_rn(b, __fsub_rn(v1, v0), v0));
    }
}

template <typename T, int CN, bool PERSPECTIVE, bool DENSE>
__device__ __forceinline__ void warp_linear(const Item<T>& it, int x, int y, int border,
                                            const float (&bval)[4], const T (&border_fill)[CN],
                                            int body_end, T (&v)[CN]) {
    int ix, iy;
    float a, b;
    linear_cell<PERSPECTIVE>(it.mf, x, y, x < body_end, ix, iy, a, b);
    if (border == CONSTANT && linear_outside(it, ix, iy)) {
#pragma unroll
        for (int c = 0; c < CN; ++c) v[c] = border_fill[c];
        return;
    }
    float p00[CN], p01[CN], p10[CN], p11[CN];
    if (linear_inside<T, CN, DENSE>(it, ix, iy)) {
        linear_taps<T, CN, DENSE>(it, ix, iy, p00, p01, p10, p11);
    } else {
        tap<T, CN, DENSE>(it, ix, iy, border, bval, p00);
        tap<T, CN, DENSE>(it, ix + 1, iy, border, bval, p01);
        tap<T, CN, DENSE>(it, ix, iy + 1, border, bval, p10);
        tap<T, CN, DENSE>(it, ix + 1, iy + 1, border, bval, p11);
    }
    linear_mix<T, CN>(a, b, p00, p01, p10, p11, v);
}

// The dense kernels' first pass over a thread's pixels (other than uint8's fast path):
// warp_nearest's / warp_linear's result where it needs no border logic (taps inside, or a
// constant border's value where they all lie outside); any other pixel takes the border
// fill for now and sets `bit` in `rest`, for dense_rest after the group's store. Keeping
// the border logic out of the unrolled loop keeps that loop small in the instruction cache.
template <typename T, int CN, bool PERSPECTIVE>
__device__ __forceinline__ void nearest_first(const Item<T>& it, int x, int y, int border,
                                              const float (&)[4], const T (&border_fill)[CN],
                                              int body_end, T (&v)[CN], unsigned& rest,
                                              unsigned bit) {
    int ix, iy;
    nearest_cell<PERSPECTIVE>(it.mf, x, y, x < body_end, ix, iy);
    if ((unsigned)ix < (unsigned)it.w && (unsigned)iy < (unsigned)it.h) {
        copy_pixel<T, CN, true>(it, it.img + (cp::i64)iy * it.s_y + (cp::i64)ix * CN, v);
        return;
    }
#pragma unroll
    for (int c = 0; c < CN; ++c) v[c] = border_fill[c];
    if (border != CONSTANT) rest |= bit;
}

template <typename T, int CN, bool PERSPECTIVE>
__device__ __forceinline__ void linear_first(const Item<T>& it, int x, int y, int border,
                                             const float (&)[4], const T (&border_fill)[CN],
                                             int body_end, T (&v)[CN], unsigned& rest,
                                             unsigned bit) {
    int ix, iy;
    float a, b;
    linear_cell<PERSPECTIVE>(it.mf, x, y, x < body_end, ix, iy, a, b);
    if (linear_inside<T, CN, true>(it, ix, iy)) {
        float p00[CN], p01[CN], p10[CN], p11[CN];
        linear_taps<T, CN, true>(it, ix, iy, p00, p01, p10, p11);
        linear_mix<T, CN>(a, b, p00, p01, p10, p11, v);
        return;
    }
#pragma unroll
    for (int c = 0; c < CN; ++c) v[c] = border_fill[c];
    if (border != CONSTANT || !linear_outside(it, ix, iy)) rest |= bit;
}

// The pixels a first pass left (bits of `rest`), one at a time, stored over what the
// group's store wrote for them: through edge(x, u) where that makes the pixel (returns
// true; dense uint8's linear_edge), else through warp_nearest / warp_linear. One copy of
// that code, out of the unrolled per-pixel loop, keeps the loop small in the instruction
// cache.
template <typename T, int CN, bool PERSPECTIVE, bool LINEAR, typename Edge>
__device__ __forceinline__ void dense_rest(const Item<T>& it, T* out, unsigned rest, int x0,
                                           int y, int border, const float (&bval)[4],
                                           const T (&border_fill)[CN], int body_end,
                                           const Edge& edge) {
    while (rest) {
        const int p = __ffs((int)rest) - 1;
        rest &= rest - 1;
        T u[CN];
        if (!edge(x0 + p, u)) {
            if (LINEAR)
                warp_linear<T, CN, PERSPECTIVE, true>(it, x0 + p, y, border, bval, border_fill,
                                                      body_end, u);
            else
                warp_nearest<T, CN, PERSPECTIVE, true>(it, x0 + p, y, border, bval,
                                                       border_fill, body_end, u);
        }
#pragma unroll
        for (int c = 0; c < CN; ++c) out[p * CN + c] = u[c];
    }
}

// A thread's `count` (1 .. PX) dense uint8 pixels, starting at `out`, from values in low
// bytes (v[p][c]: channel c of pixel p): as 32- or 16-bit words when all PX are there, the
// group's bytes divide into words and `out` is aligned for them (rows whose byte stride is
// not a multiple of the word size alternate); bytes otherwise.
template <int CN, int PX>
__device__ __forceinline__ void store_low_bytes(unsigned char* out, int count,
                                                const unsigned (&v)[PX][CN]) {
    if constexpr ((PX * CN) % 2 == 0) {
        constexpr int kWord = (PX * CN) % 4 == 0 ? 4 : 2;
        if (count == PX && ((unsigned long long)out & (kWord - 1)) == 0) {
#pragma unroll
            for (int k = 0; k < PX * CN / kWord; ++k) {
                const int e = kWord * k;
                const unsigned b01 = __byte_perm(v[e / CN][e % CN], v[(e + 1) / CN][(e + 1) % CN], 0x0040u);
                if constexpr (kWord == 2) {
                    reinterpret_cast<unsigned short*>(out)[k] = (unsigned short)b01;
                } else {
                    const unsigned b23 = __byte_perm(v[(e + 2) / CN][(e + 2) % CN], v[(e + 3) / CN][(e + 3) % CN], 0x0040u);
                    reinterpret_cast<unsigned*>(out)[k] = __byte_perm(b01, b23, 0x5410u);
                }
            }
            return;
        }
    }
#pragma unroll
    for (int p = 0; p < PX; ++p) {
        if (p < count) {
#pragma unroll
            for (int c = 0; c < CN; ++c) out[p * CN + c] = (unsigned char)v[p][c];
        }
    }
}

// The bits of a 2- or 4-byte element.
__device__ __forceinline__ unsigned element_bits(float v) { return __float_as_uint(v); }
__device__ __forceinline__ unsigned element_bits(cp_half v) { return v.bits; }
__device__ __forceinline__ unsigned element_bits(unsigned short v) { return v; }

// A dense group of PX whole pixels (PX * CN elements of 2 or 4 bytes, adjacent in memory)
// as 16- or 8-byte words where `out` is aligned to the word and the group divides into
// them; returns false (nothing stored) otherwise.
template <typename T, int CN, int PX>
__device__ __forceinline__ bool store_group_words(T* out, const T (&v)[PX][CN]) {
    constexpr int kBytes = PX * CN * (int)sizeof(T), kPer = 4 / (int)sizeof(T);
    unsigned w[kBytes / 4];  // the group's 32-bit words, in memory order
#pragma unroll
    for (int k = 0; k < kBytes / 4; ++k) {
        w[k] = 0;
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
            const int e = k * kPer + j;
            w[k] |= element_bits(v[e / CN][e % CN]) << (16 * j);
        }
    }
    const unsigned long long at = (unsigned long long)out;
    if (kBytes % 16 == 0 && at % 16 == 0) {
#pragma unroll
        for (int k = 0; k < kBytes / 16; ++k)
            reinterpret_cast<uint4*>(out)[k] = make_uint4(w[4 * k], w[4 * k + 1], w[4 * k + 2], w[4 * k + 3]);
        return true;
    }
    if (kBytes % 8 == 0 && at % 8 == 0) {
#pragma unroll
        for (int k = 0; k < kBytes / 8; ++k)
            reinterpret_cast<uint2*>(out)[k] = make_uint2(w[2 * k], w[2 * k + 1]);
        return true;
    }
    return false;
}

// A thread's `count` (1 .. PX) pixels, starting at `out` (DENSE uint8: store_low_bytes;
// other DENSE types as words where they can: store_group_words).
template <typename T, int CN, bool DENSE, int PX>
__device__ __forceinline__ void store_pixels(T* out, int count, cp::i64 d_x, cp::i64 d_c,
                                             const T (&v)[PX][CN]) {
    if constexpr (DENSE && sizeof(T) > 1) {
        if (count == PX && store_group_words<T, CN, PX>(out, v)) return;
    }
    if constexpr (DENSE && sizeof(T) == 1) {
        unsigned u[PX][CN];
#pragma unroll
        for (int p = 0; p < PX; ++p) {
#pragma unroll
            for (int c = 0; c < CN; ++c) u[p][c] = v[p][c];
        }
        store_low_bytes<CN, PX>(reinterpret_cast<unsigned char*>(out), count, u);
        return;
    }
    const cp::i64 s_x = DENSE ? (cp::i64)CN : d_x, s_c = DENSE ? (cp::i64)1 : d_c;
#pragma unroll
    for (int p = 0; p < PX; ++p) {
        if (p < count) {
#pragma unroll
            for (int c = 0; c < CN; ++c) out[p * s_x + c * s_c] = v[p][c];
        }
    }
}

// --- dense uint8, 1, 3 or 4 channels: the interior pixels' fast path ------------------
// The same arithmetic as warp_nearest / warp_linear, with the conversions done by float
// bit patterns instead of conversion instructions (which issue at a fraction of the FMA
// rate):
// - a byte p becomes the float 2^23 + p by placing it under the exponent byte 0x4B;
//   differences of two such floats are exact, and p itself is (2^23 + p) - 2^23;
// - floor(s) for 0 <= s < 2^22: s + 2^23 rounded toward zero is exactly 2^23 + floor(s)
//   (its unit in the last place is 1), so the fraction s - floor(s) is exact as before and
//   the integer floor(s) sits in the low bits of the sum's bit pattern; rint(s) (half to
//   even) likewise from s + 1.5 * 2^23 rounded to nearest;
// - cvRound(v) for v in [0, 256): v + 1.5 * 2^23 rounded to nearest, whose low byte is the
//   rounded value (half to even, as cvRound). Linear's v lies in [0, 255 + 2^-16]: the
//   blend of two values in [0, 255] with a weight in [0, 1) stays in [0, 255] up to the
//   one rounding of their difference (at most 2^-17 at 255), so it rounds into [0, 255]
//   and saturate_cast clamps nothing.
// A pixel takes it when its taps and the aligned 32-bit words that cover them lie inside
// the image, that is for 1 <= sx < w - dense_u8_span (4 for 1 channel, 3 for 3, 2 for 4)
// and 0 <= sy < h - 1 (a NaN fails these), when those bounds are below 2^22, and when byte
// offsets within the image fit in int32. With a constant border, a pixel all of whose taps
// are outside is the border value there too; every other pixel is left to dense_rest,
// after the group is stored (linear_edge, or warp_nearest / warp_linear).
template <typename T, int CN, bool DENSE>
struct dense_u8 {
    static constexpr bool value = DENSE && sizeof(T) == 1 && (CN == 1 || CN == 3 || CN == 4);
};

// How far short of the image's width the fast path's x stops: the words its reads cover
// reach that many pixels past the tap pair's first (one channel: up to 4 bytes past).
template <int CN>
struct dense_u8_span {
    static constexpr int value = CN == 1 ? 4 : (CN == 3 ? 3 : 2);
};

constexpr float kRound = 12582912.f;  // 1.5 * 2^23
constexpr unsigned kRoundBits = 0x4B400000u;

// Per image: the fast path's bounds and the byte offset, counted from the image's first
// word, of a tap whose coordinates are given as the bit patterns bx and by of 2^23 + ix and
// 2^23 + iy (or 1.5 * 2^23 + ix / iy for nearest): bx * CN + by * s_y + bias in 32-bit
// arithmetic.
struct DenseU8 {
    const unsigned* words;  // the image's first byte, rounded down to a 32-bit word
    unsigned s_y32, bias;
    float x_hi, y_hi;  // NaN: no fast pixels
};

template <bool LINEAR, int CN>
__device__ __forceinline__ DenseU8 dense_u8_image(const Item<unsigned char>& it) {
    DenseU8 d;
    const cp::WordBase wb = cp::word_base(it.img);
    d.words = wb.words;
    d.s_y32 = (unsigned)it.s_y;
    const unsigned k = LINEAR ? kTwo23Bits : kRoundBits;
    // offsets count from `words`: the image's own offset within its word joins the bias
    d.bias = wb.mis - k * (d.s_y32 + (unsigned)CN);
    const bool ok = cp::byte_offsets_fit<CN>(it.h, it.w, it.s_y, 3) && it.w < (1 << 22) &&
                    it.h < (1 << 22);
    const float nan = __uint_as_float(0x7FC00000u);
    d.x_hi = ok ? (float)(it.w - dense_u8_span<CN>::value) : nan;
    d.y_hi = ok ? (float)(it.h - 1) : nan;
    return d;
}

// Whether a pixel at (sx, sy) is the constant border value: linear, ix = floor(sx) < -1 or
// >= w (sx < -1 or sx >= w; likewise y), which is warp_linear's test; nearest, rint(sx) < 0
// or >= w, of which this takes sx < -0.5 or sx > w - 0.5 (a tie goes to warp_nearest).
// w and h come back from the fast path's bounds (exact below 2^22); where those are NaN
// only the lower bounds, which need no size, take pixels.
template <bool LINEAR, int CN>
__device__ __forceinline__ bool outside_u8(const DenseU8& d, float sx, float sy) {
    const float w = d.x_hi + (float)dense_u8_span<CN>::value, h = d.y_hi + 1.f;
    if (LINEAR) return sx < -1.f || sx >= w || sy < -1.f || sy >= h;
    return sx < -0.5f || sx > w - 0.5f || sy < -0.5f || sy > h - 0.5f;
}

// The bytes [off, off + 4) counted from `words`.
__device__ __forceinline__ unsigned window4(const unsigned* words, unsigned off) {
    const unsigned* w = words + ((int)off >> 2);
    return __funnelshift_r(__ldg(w), __ldg(w + 1), off << 3);
}

// warp_linear's blend of four taps given as 2^23 + value (row, column): the low byte of
// the result is the rounded pixel.
__device__ __forceinline__ unsigned blend_biased(float a, float b, float q00, float q01,
                                                 float q10, float q11) {
    const float v0 = __fmaf_rn(a, __fsub_rn(q01, q00), __fsub_rn(q00, kTwo23));
    const float v1 = __fmaf_rn(a, __fsub_rn(q11, q10), __fsub_rn(q10, kTwo23));
    return __float_as_uint(__fadd_rn(__fmaf_rn(b, __fsub_rn(v1, v0), v0), kRound));
}

// One interior pixel, linear: v[c]'s low byte is the result.
template <int CN>
__device__ __forceinline__ void linear_fast(const DenseU8& d, float sx, float sy,
                                            unsigned (&v)[CN]) {
    const float tx = __fadd_rz(sx, kTwo23), ty = __fadd_rz(sy, kTwo23);
    const float a = __fsub_rn(sx, __fsub_rn(tx, kTwo23)), b = __fsub_rn(sy, __fsub_rn(ty, kTwo23));
    const unsigned off = __float_as_uint(ty) * d.s_y32 + __float_as_uint(tx) * CN + d.bias;
    unsigned lo0, hi0, lo1, hi1;
    if constexpr (CN == 1) {  // the word holding the pair's first byte, the next only if needed
        const unsigned off1 = off + d.s_y32;
        const unsigned* w0 = d.words + ((int)off >> 2);
        const unsigned* w1 = d.words + ((int)off1 >> 2);
        const bool next = (off & 3u) == 3u, next1 = (off1 & 3u) == 3u;
        lo0 = __funnelshift_r(__ldg(w0), next ? __ldg(w0 + 1) : 0u, off << 3);
        lo1 = __funnelshift_r(__ldg(w1), next1 ? __ldg(w1 + 1) : 0u, off1 << 3);
        hi0 = hi1 = 0u;
    } else {
        cp::window8<2 * CN>(d.words, off, lo0, hi0);
        cp::window8<2 * CN>(d.words, off + d.s_y32, lo1, hi1);
    }
#pragma unroll
    for (int c = 0; c < CN; ++c) {
        const float q00 = biased(lo0, hi0, c), q01 = biased(lo0, hi0, CN + c);
        const float q10 = biased(lo1, hi1, c), q11 = biased(lo1, hi1, CN + c);
        v[c] = blend_biased(a, b, q00, q01, q10, q11);
    }
}

// One interior pixel, nearest: the pixel's CN bytes at the bottom of v[0] (bytes
// repeated in v[c]).
template <int CN>
__device__ __forceinline__ void nearest_fast(const DenseU8& d, float sx, float sy,
                                             unsigned (&v)[CN]) {
    const unsigned bx = __float_as_uint(__fadd_rn(sx, kRound));
    const unsigned by = __float_as_uint(__fadd_rn(sy, kRound));
    const unsigned off = by * d.s_y32 + bx * CN + d.bias;
    if constexpr (CN == 1) {
        v[0] = __ldg(reinterpret_cast<const unsigned char*>(d.words) + (int)off);
    } else {
        const unsigned px = window4(d.words, off);
#pragma unroll
        for (int c = 0; c < CN; ++c) v[c] = px >> (8 * c);
    }
}

// One pixel at source (sx, sy), dense uint8: the fast path where it applies, or the
// constant border value where every tap is outside; v[c]'s low byte is channel c. The
// other pixels (taps across the border, non-constant borders outside, images too large for
// the fast path) set `bit` in `rest`, for dense_rest.
template <bool LINEAR, int CN>
__device__ __forceinline__ void dense_u8_pixel(const DenseU8& d, float sx, float sy, int border,
                                               const unsigned char (&border_fill)[CN],
                                               unsigned (&v)[CN], unsigned& rest,
                                               unsigned bit) {
    if (sx >= 1.f && sx < d.x_hi && sy >= 0.f && sy < d.y_hi) {
        if (LINEAR)
            linear_fast<CN>(d, sx, sy, v);
        else
            nearest_fast<CN>(d, sx, sy, v);
    } else {
#pragma unroll
        for (int c = 0; c < CN; ++c) v[c] = border_fill[c];
        if (border != CONSTANT || !outside_u8<LINEAR, CN>(d, sx, sy)) rest |= bit;
    }
}

// A thread's pixels x0 .. x0 + count - 1 of row y, dense uint8: v[p][c]'s low byte is
// channel c of pixel p. A whole group inside OpenCV's SIMD body (affine) computes the
// row's coordinate terms once. Returns the pixels left to dense_rest (bit p: pixel p).
template <bool LINEAR, int CN, bool PERSPECTIVE, int PX>
__device__ __forceinline__ unsigned dense_u8_pixels(const Item<unsigned char>& it,
                                                    const DenseU8& d, int x0, int count, int y,
                                                    int border,
                                                    const unsigned char (&border_fill)[CN],
                                                    int body_end, unsigned (&v)[PX][CN]) {
    unsigned rest = 0;
    if (!PERSPECTIVE && count == PX && x0 + PX <= body_end) {
        const float fy = (float)y, fx0 = (float)x0;
        const float rx = __fadd_rn(__fmul_rn(fy, it.mf[1]), it.mf[2]);
        const float ry = __fadd_rn(__fmul_rn(fy, it.mf[4]), it.mf[5]);
#pragma unroll
        for (int p = 0; p < PX; ++p) {
            const float fx = __fadd_rn(fx0, (float)p);  // exact: x < 2^24
            dense_u8_pixel<LINEAR, CN>(d, __fmaf_rn(it.mf[0], fx, rx), __fmaf_rn(it.mf[3], fx, ry),
                                       border, border_fill, v[p], rest, 1u << p);
        }
        return rest;
    }
#pragma unroll
    for (int p = 0; p < PX; ++p) {
        if (p < count) {
            float sx, sy;
            float_coords<PERSPECTIVE>(it.mf, x0 + p, y, x0 + p < body_end, sx, sy);
            dense_u8_pixel<LINEAR, CN>(d, sx, sy, border, border_fill, v[p], rest, 1u << p);
        }
    }
    return rest;
}

// One linear pixel the fast path left, dense uint8, for images whose offsets fit its
// 32-bit arithmetic (x_hi not NaN): warp_linear's arithmetic step by step (its float
// coordinates, taps through border_index, constant taps the border value), with bytes made
// floats as linear_fast makes them (2^23 + byte). Taps are read as bytes: the words around
// an edge pixel can reach past the image, and the word reads that avoid that (rows inside
// the first and last) made the whole kernel slower (benchmarks/NOTES.md). uint8 border
// values are whole numbers in [0, 255], so 2^23 + bval is exact and the blend stays in
// [0, 255].
template <int CN, bool PERSPECTIVE>
__device__ __forceinline__ void linear_edge(const Item<unsigned char>& it, const DenseU8& d,
                                            int x, int y, int border, const float (&bval)[4],
                                            int body_end, unsigned (&v)[CN]) {
    int ix, iy;
    float a, b;
    linear_cell<PERSPECTIVE>(it.mf, x, y, x < body_end, ix, iy, a, b);
    const unsigned mis = d.bias + kTwo23Bits * (d.s_y32 + (unsigned)CN);  // start in its word
    float q[2][2][CN];  // tap (row r, column k), channel c, as 2^23 + value
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int by = border_index(iy + r, it.h, border);
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            const int bx = border_index(ix + k, it.w, border);
            if (bx < 0 || by < 0) {
#pragma unroll
                for (int c = 0; c < CN; ++c) q[r][k][c] = __fadd_rn(bval[c], kTwo23);
            } else {
                const unsigned off = (unsigned)by * d.s_y32 + (unsigned)bx * CN + mis;
                const unsigned char* px =
                    reinterpret_cast<const unsigned char*>(d.words) + (int)off;
#pragma unroll
                for (int c = 0; c < CN; ++c)
                    q[r][k][c] = __uint_as_float(kTwo23Bits | __ldg(px + c));
            }
        }
    }
#pragma unroll
    for (int c = 0; c < CN; ++c)
        v[c] = blend_biased(a, b, q[0][0][c], q[0][1][c], q[1][0][c], q[1][1][c]);
}

// dense_rest's edge path for the pixels dense_u8_pixels left: linear through linear_edge
// where the image's offsets allow (returns whether it made the pixel).
template <bool LINEAR, int CN, bool PERSPECTIVE>
__device__ __forceinline__ bool dense_u8_edge(const Item<unsigned char>& it, const DenseU8& d,
                                              int x, int y, int border, const float (&bval)[4],
                                              int body_end, unsigned char (&u)[CN]) {
    if (!LINEAR || d.x_hi != d.x_hi) return false;
    unsigned e[CN];
    linear_edge<CN, PERSPECTIVE>(it, d, x, y, border, bval, body_end, e);
#pragma unroll
    for (int c = 0; c < CN; ++c) u[c] = (unsigned char)e[c];
    return true;
}

// --- OpenCV's older remap path --------------------------------------------------------
constexpr int kInterBits = 5, kTab = 1 << kInterBits, kAbBits = 10, kAbScale = 1 << kAbBits;

__device__ __forceinline__ int saturate_short(int v) {
    return v < -32768 ? -32768 : (v > 32767 ? 32767 : v);
}

// cvRound of a double, saturated to int (saturate_cast<int>).
__device__ __forceinline__ int round_int(double v) { return __double2int_rn(v); }

// The width of WarpPerspectiveInvoker's blocks for a dh x dw output: it makes its map in
// blocks of at most 32 x 32 pixels, min(16, dh) rows by this many columns.
__device__ __forceinline__ int perspective_block_width(int dh, int dw) {
    return min(1024 / min(16, max(dh, 1)), dw);
}

// Source coordinates in 1/32 pixel (or whole pixels for nearest): OpenCV's WarpAffineInvoker
// and WarpPerspectiveInvoker. Returns the integer cell (saturated to int16, as OpenCV keeps
// it) and the table index (fy * 32 + fx). The perspective one sums as OpenCV does, from its
// block's first column xb (block_w columns a block): X0 = M0 xb + M1 y + M2, then
// X0 + M0 (x - xb) (likewise Y and W), which can round otherwise than M0 x + M1 y + M2 (a
// W of exactly 0 there, the pixel then taken from (0, 0), is 1e-16 summed the other way).
template <bool PERSPECTIVE, bool NEAREST>
__device__ __forceinline__ void fixed_coords(const double* m, int x, int y, int block_w, int& sx,
                                             int& sy, int& frac) {
    int X, Y;
    if (!PERSPECTIVE) {
        const int round_delta = NEAREST ? kAbScale / 2 : kAbScale / kTab / 2;
        const int X0 = round_int(__dmul_rn(__dadd_rn(__dmul_rn(m[1], (double)y), m[2]), kAbScale)) + round_delta;
        const int Y0 = round_int(__dmul_rn(__dadd_rn(__dmul_rn(m[4], (double)y), m[5]), kAbScale)) + round_delta;
        const int adelta = round_int(__dmul_rn(__dmul_rn(m[0], (double)x), kAbScale));
        const int bdelta = round_int(__dmul_rn(__dmul_rn(m[3], (double)x), kAbScale));
        // int32 wrap-around as in OpenCV's C++ (computed unsigned to stay defined)
        X = (int)((unsigned)X0 + (unsigned)adelta) >> (NEAREST ? kAbBits : kAbBits - kInterBits);
        Y = (int)((unsigned)Y0 + (unsigned)bdelta) >> (NEAREST ? kAbBits : kAbBits - kInterBits);
    } else {
        const int xb = x - x % block_w;
        const double fxb = (double)xb, fx1 = (double)(x - xb), fyd = (double)y;
        const double X0 = __dadd_rn(__dadd_rn(__dmul_rn(m[0], fxb), __dmul_rn(m[1], fyd)), m[2]);
        const double Y0 = __dadd_rn(__dadd_rn(__dmul_rn(m[3], fxb), __dmul_rn(m[4], fyd)), m[5]);
        const double W0 = __dadd_rn(__dadd_rn(__dmul_rn(m[6], fxb), __dmul_rn(m[7], fyd)), m[8]);
        double W = __dadd_rn(W0, __dmul_rn(m[6], fx1));
        W = W != 0.0 ? __ddiv_rn(NEAREST ? 1.0 : (double)kTab, W) : 0.0;
        const double lim = 2147483647.0;
        double fX = __dmul_rn(__dadd_rn(X0, __dmul_rn(m[0], fx1)), W);
        double fY = __dmul_rn(__dadd_rn(Y0, __dmul_rn(m[3], fx1)), W);
        fX = fX != fX ? 0.0 : fmax(-lim - 1.0, fmin(lim, fX));
        fY = fY != fY ? 0.0 : fmax(-lim - 1.0, fmin(lim, fY));
        X = round_int(fX);
        Y = round_int(fY);
    }
    if (NEAREST) {
        sx = saturate_short(X);
        sy = saturate_short(Y);
        frac = 0;
    } else {
        sx = saturate_short(X >> kInterBits);
        sy = saturate_short(Y >> kInterBits);
        frac = (Y & (kTab - 1)) * kTab + (X & (kTab - 1));
    }
}

template <typename T, int CN, bool PERSPECTIVE>
__device__ __forceinline__ void warp_nearest_fixed(const Item<T>& it, cp::i64 d_c, int border,
                                                   const float (&bval)[4], int block_w) {
    int sx, sy, frac;
    fixed_coords<PERSPECTIVE, true>(it.m, it.x, it.y, block_w, sx, sy, frac);
    float p[CN];
    tap<T, CN>(it, sx, sy, border, bval, p);
#pragma unroll
    for (int c = 0; c < CN; ++c) it.out[c * d_c] = cp::from_float<T>(p[c]);
}

// remapBilinear: uint8 sums int32 products with int16 weights, then
// (sum + (1 << 14)) >> 15 saturated; others sum float32 products
// ((p00 w0 + p01 w1) + p10 w2) + p11 w3 and round on store.
template <typename T, int CN, bool PERSPECTIVE>
__device__ __forceinline__ void warp_linear_fixed(const Item<T>& it, cp::i64 d_c, int border,
                                                  const float (&bval)[4], const short* itab,
                                                  const float* ftab, int block_w) {
    int sx, sy, frac;
    fixed_coords<PERSPECTIVE, false>(it.m, it.x, it.y, block_w, sx, sy, frac);
    if (border == CONSTANT && (sx >= it.w || sx + 1 < 0 || sy >= it.h || sy + 1 < 0)) {
        fill<T, CN>(it.out, d_c, bval);
        return;
    }
    float p[4][CN];
    tap<T, CN>(it, sx, sy, border, bval, p[0]);
    tap<T, CN>(it, sx + 1, sy, border, bval, p[1]);
    tap<T, CN>(it, sx, sy + 1, border, bval, p[2]);
    tap<T, CN>(it, sx + 1, sy + 1, border, bval, p[3]);
    if constexpr (sizeof(T) == 1) {
        const short* w = itab + frac * 4;
#pragma unroll
        for (int c = 0; c < CN; ++c) {
            int sum = 0;
#pragma unroll
            for (int k = 0; k < 4; ++k) sum += (int)p[k][c] * (int)w[k];
            it.out[c * d_c] = cp::saturate_u8((sum + (1 << 14)) >> 15);
        }
    } else {
        const float* w = ftab + frac * 4;
#pragma unroll
        for (int c = 0; c < CN; ++c) {
            float sum = __fmul_rn(p[0][c], w[0]);
#pragma unroll
            for (int k = 1; k < 4; ++k) sum = __fadd_rn(sum, __fmul_rn(p[k][c], w[k]));
            it.out[c * d_c] = cp::from_float<T>(sum);
        }
    }
}

// Cubic's sum over a 4x4 window in float32, row by row, each row's products and then the
// rows' fused multiply-adds (half the instructions of separate products and sums; OpenCV's
// own order is not reproduced either way). load(r, k, p) gives tap (row r, column k).
template <int CN, typename Load>
__device__ __forceinline__ void cubic_sum(const Load& load, const float (&wx)[4],
                                          const float (&wy)[4], float (&acc)[CN]) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        float row[CN];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            float p[CN];
            load(r, k, p);
#pragma unroll
            for (int c = 0; c < CN; ++c)
                row[c] = k ? __fmaf_rn(p[c], wx[k], row[c]) : __fmul_rn(p[c], wx[0]);
        }
#pragma unroll
        for (int c = 0; c < CN; ++c)
            acc[c] = r ? __fmaf_rn(row[c], wy[r], acc[c]) : __fmul_rn(row[c], wy[0]);
    }
}

// A window's weights and a pixel's sums, passed to and from cubic_border_sum by value: an
// array passed by reference to a function that is not inlined lives in local memory, and
// the weights were then stored there for every pixel, the interior ones too.
struct CubicWeights {
    float x[4], y[4];
};
template <int CN>
struct CubicSums {
    float v[CN];
};

// The sum over a window that reaches past the image, each tap through the border: out of
// line, so that a thread's pixels do not each carry a copy of the border logic.
template <typename T, int CN, bool DENSE>
__device__ __noinline__ CubicSums<CN> cubic_border_sum(const Item<T>& it, int ix, int iy,
                                                       int border, const float (&bval)[4],
                                                       CubicWeights w) {
    CubicSums<CN> acc;
    cubic_sum<CN>([&](int r, int k, float (&p)[CN]) {
        tap<T, CN, DENSE>(it, ix - 1 + k, iy - 1 + r, border, bval, p);
    }, w.x, w.y, acc.v);
    return acc;
}

// Cubic: OpenCV 5 samples Keys' kernel at the unquantized float32 coordinate (its float
// warp coordinates, as nearest / linear); taps outside follow the border, and with a
// constant border a pixel whose 4x4 window lies wholly outside is the border value. The
// products are summed as cubic_sum does (OpenCV's own summation order is not reproduced:
// results agree within float32 rounding, 1 for integer types). A window wholly inside the
// image reads its rows directly; others go through cubic_border_sum.
template <typename T, int CN, bool PERSPECTIVE, bool DENSE>
__device__ __forceinline__ void warp_cubic(const Item<T>& it, int x, int y, int border,
                                           const float (&bval)[4], const T (&border_fill)[CN],
                                           int body_end, T (&v)[CN]) {
    float sx, sy;
    float_coords<PERSPECTIVE>(it.mf, x, y, true, sx, sy);
    // OpenCV 5's cubic warp clamps each source coordinate to [-m, 2m], m = max(side, 16),
    // before taking taps (seen with cv2.warpAffine: far outside, every pixel equals the
    // one at the clamp; it matters only for the periodic borders)
    const float mx = (float)max(it.w, 16), my = (float)max(it.h, 16);
    sx = fminf(fmaxf(tame(sx), -mx), 2.f * mx);
    sy = fminf(fmaxf(tame(sy), -my), 2.f * my);
    const int ix = __float2int_rd(sx), iy = __float2int_rd(sy);
    if (border == CONSTANT && (ix + 2 < 0 || ix - 1 >= it.w || iy + 2 < 0 || iy - 1 >= it.h)) {
#pragma unroll
        for (int c = 0; c < CN; ++c) v[c] = border_fill[c];
        return;
    }
    CubicWeights w;
    cp::cubic_weights(__fsub_rn(sx, (float)ix), w.x);  // resize's weights (sampling.cuh)
    cp::cubic_weights(__fsub_rn(sy, (float)iy), w.y);
    CubicSums<CN> acc;
    // dense integer and float16 pixels: each window row's 4 * CN elements from the aligned
    // words that cover them (row_words64 for rows of 24 or 32 bytes, 2-byte elements of 3
    // or 4 channels; row_words's 32-bit words for the shorter rows, where the 8-byte words'
    // selects cost more than their fewer loads save), which reach up to 7 (3) bytes past
    // the row's last tap (the window must end that many pixels inside the image's row);
    // float32 of 1 or 3 channels through row_words8 (2 and 4 channels are whole-word
    // pixels: load_pixel)
    constexpr bool kWords = DENSE && (sizeof(T) <= 2 || !pixel_words<T, CN>::value);
    constexpr int kPixel = CN * (int)sizeof(T);
    constexpr int kReach = kPixel >= 6 ? 7 : 3;
    constexpr int kPast = kWords && sizeof(T) <= 2 ? (kReach + kPixel - 1) / kPixel : 0;
    if (ix >= 1 && ix + 2 + kPast < it.w && iy >= 1 && iy + 2 < it.h) {
        const cp::i64 s_x = pixel_step<DENSE, CN>(it);
        const T* first = it.img + (cp::i64)(iy - 1) * it.s_y + (cp::i64)(ix - 1) * s_x;
        if constexpr (kWords) {
            unsigned b[4][kPixel];  // a row's 4 * kPixel bytes as kPixel words
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                if constexpr (sizeof(T) == 4)
                    row_words8<kPixel>(first + r * it.s_y, b[r]);
                else if constexpr (kPixel >= 6)
                    row_words64<kPixel>(reinterpret_cast<const unsigned char*>(first + r * it.s_y), b[r]);
                else
                    row_words<kPixel>(reinterpret_cast<const unsigned char*>(first + r * it.s_y), b[r]);
            }
            cubic_sum<CN>([&](int r, int k, float (&p)[CN]) {
#pragma unroll
                for (int c = 0; c < CN; ++c) p[c] = word_element<T>(b[r], k * CN + c);
            }, w.x, w.y, acc.v);
        } else {
            cubic_sum<CN>([&](int r, int k, float (&p)[CN]) {
                load_pixel<T, CN, DENSE>(it, first + r * it.s_y + k * s_x, p);
            }, w.x, w.y, acc.v);
        }
    } else {
        acc = cubic_border_sum<T, CN, DENSE>(it, ix, iy, border, bval, w);
    }
#pragma unroll
    for (int c = 0; c < CN; ++c) v[c] = cp::from_float<T>(acc.v[c]);
}

// Cubic in the dense kernels' first pass: the whole pixel (its border logic is already out
// of line in cubic_border_sum), never left to dense_rest.
template <typename T, int CN, bool PERSPECTIVE>
__device__ __forceinline__ void cubic_first(const Item<T>& it, int x, int y, int border,
                                            const float (&bval)[4], const T (&border_fill)[CN],
                                            int body_end, T (&v)[CN], unsigned&, unsigned) {
    warp_cubic<T, CN, PERSPECTIVE, true>(it, x, y, border, bval, border_fill, body_end, v);
}

}  // namespace

#define CUPYPREP_WARP_KERNEL(OP, PERSPECTIVE, NAME, CALL)                                 \
    template <typename T, int CN>                                                         \
    __global__ void cupyprep_warp_##OP##_##NAME(CUPYPREP_WARP_PARAMS) {                   \
        const float bval[4] = {bv0, bv1, bv2, bv3};                                       \
        constexpr bool P = PERSPECTIVE;                                                   \
        const int block_w = perspective_block_width(dh, dw);                              \
        for (int n = blockIdx.z; n < n_out; n += gridDim.z) {                             \
            Item<T> it = image_item<T>(n, src, !src, src_table, src_list.v, sh, sw, s_n,  \
                                       s_y, s_x, s_c, src_index, mats, mat_step,          \
                                       mat_value.v);                                      \
            for (int j = 0; j < (P ? 9 : 6); ++j) it.mf[j] = (float)it.m[j];              \
            T* image_out = dst + (cp::i64)n * d_n;                                        \
            for (int x = blockIdx.x * blockDim.x + threadIdx.x; x < dw;                   \
                 x += gridDim.x * blockDim.x) {                                           \
                it.x = x;                                                                 \
                for (int g = blockIdx.y; g * rows_per_block < dh; g += gridDim.y) {       \
                    const int y_end = min(dh, (g + 1) * rows_per_block);                  \
                    for (int y = g * rows_per_block; y < y_end; ++y) {                    \
                        it.y = y;                                                         \
                        it.out = image_out + (cp::i64)y * d_y + (cp::i64)x * d_x;         \
                        CALL;                                                             \
                    }                                                                     \
                }                                                                         \
            }                                                                             \
        }                                                                                 \
    }

// Nearest, linear and cubic: <T, CN, DENSE, PX, LIST> (see the file comment; PIXEL makes a
// whole pixel, FIRST a dense kernel's first pass over it, leaving pixels to dense_rest; U8:
// whether DENSE uint8 takes the interior fast path, nearest and linear only); a thread makes PX
// pixels side by side (x0 .. x0 + PX - 1, those below dw) in each of its rows. Blocks may
// be 2-D: blockIdx.y then covers rows_per_block * blockDim.y rows, and threadIdx.y takes
// every blockDim.y-th of them, so a warp can cover a tile of several rows (a rotated
// tile's taps span fewer source rows than a one-row strip's). The generic variants (DENSE
// and LIST false) take a list where `src` is NULL; the dense ones know at compile time
// whether their sources are a list (LIST) or one strided batch, whose geometry then stays
// in kernel parameters rather than registers (a run-time test there cost the 3-channel
// uint8 kernel 4 registers).
#define CUPYPREP_WARP_FLOAT_KERNEL(OP, PERSPECTIVE, NAME, PIXEL, FIRST, LINEAR, U8)       \
    template <typename T, int CN, bool DENSE, int PX, bool LIST>                          \
    __global__ void cupyprep_warp_##OP##_##NAME(CUPYPREP_WARP_PARAMS) {                   \
        const float bval[4] = {bv0, bv1, bv2, bv3};                                       \
        T border_fill[CN];                                                                \
        for (int c = 0; c < CN; ++c) border_fill[c] = cp::from_float<T>(bval[c]);         \
        const int groups = (dw - 1) / PX + 1;                                             \
        const int tile_rows = rows_per_block * blockDim.y;                                \
        for (int n = blockIdx.z; n < n_out; n += gridDim.z) {                             \
            Item<T> it = image_item<T>(n, src, DENSE ? LIST : !src, src_table, src_list.v, \
                                       sh, sw, s_n, s_y, s_x, s_c, src_index, mats,       \
                                       mat_step, mat_value.v);                            \
            for (int j = 0; j < (PERSPECTIVE ? 9 : 6); ++j) it.mf[j] = (float)it.m[j];    \
            if constexpr (DENSE && pixel_words<T, CN>::value)                             \
                it.words = pixel_words<T, CN>::aligned(it.img, it.s_y);                   \
            DenseU8 fast{};                                                               \
            if constexpr (dense_u8<T, CN, DENSE && U8>::value)                                  \
                fast = dense_u8_image<LINEAR, CN>(it);                                    \
            T* image_out = dst + (cp::i64)n * d_n;                                        \
            for (int gx = blockIdx.x * blockDim.x + threadIdx.x; gx < groups;             \
                 gx += gridDim.x * blockDim.x) {                                          \
                const int x0 = gx * PX, count = min(PX, dw - x0);                         \
                for (int g = blockIdx.y; g * tile_rows < dh; g += gridDim.y) {            \
                    const int y_end = min(dh, (g + 1) * tile_rows);                       \
                    const int y0 = g * tile_rows + (int)threadIdx.y;                      \
                    T* out = image_out + (cp::i64)y0 * d_y +                              \
                             (cp::i64)x0 * (DENSE ? (cp::i64)CN : d_x);                   \
                    const cp::i64 out_step = (cp::i64)blockDim.y * d_y;                   \
                    for (int y = y0; y < y_end; y += blockDim.y, out += out_step) {        \
                        if constexpr (dense_u8<T, CN, DENSE && U8>::value) {                    \
                            unsigned u[PX][CN];                                           \
                            const unsigned rest = dense_u8_pixels<LINEAR, CN, PERSPECTIVE, PX>( \
                                it, fast, x0, count, y, border, border_fill, body_end, u); \
                            store_low_bytes<CN, PX>(out, count, u);                       \
                            if (rest)                                                     \
                                dense_rest<T, CN, PERSPECTIVE, LINEAR>(                   \
                                    it, out, rest, x0, y, border, bval, border_fill,      \
                                    body_end, [&](int x, T (&e)[CN]) {                    \
                                        return dense_u8_edge<LINEAR, CN, PERSPECTIVE>(    \
                                            it, fast, x, y, border, bval, body_end, e);   \
                                    });                                                   \
                        } else if constexpr (DENSE) {                                     \
                            T v[PX][CN];                                                  \
                            unsigned rest = 0;                                            \
                            _Pragma("unroll") for (int p = 0; p < PX; ++p) {              \
                                if (p < count)                                            \
                                    FIRST<T, CN, PERSPECTIVE>(it, x0 + p, y, border, bval, \
                                                              border_fill, body_end, v[p], \
                                                              rest, 1u << p);             \
                            }                                                             \
                            store_pixels<T, CN, true, PX>(out, count, d_x, d_c, v);       \
                            if (rest)                                                     \
                                dense_rest<T, CN, PERSPECTIVE, LINEAR>(                   \
                                    it, out, rest, x0, y, border, bval, border_fill,      \
                                    body_end, [](int, T(&)[CN]) { return false; });       \
                        } else {                                                          \
                            T v[PX][CN];                                                  \
                            _Pragma("unroll") for (int p = 0; p < PX; ++p) {              \
                                if (p < count)                                            \
                                    PIXEL<T, CN, PERSPECTIVE, DENSE>(it, x0 + p, y,       \
                                                                     border, bval,        \
                                                                     border_fill,         \
                                                                     body_end, v[p]);     \
                            }                                                             \
                            store_pixels<T, CN, DENSE, PX>(out, count, d_x, d_c, v);      \
                        }                                                                 \
                    }                                                                     \
                }                                                                         \
            }                                                                             \
        }                                                                                 \
    }

CUPYPREP_WARP_FLOAT_KERNEL(affine, false, nearest, warp_nearest, nearest_first, false, true)
CUPYPREP_WARP_FLOAT_KERNEL(affine, false, linear, warp_linear, linear_first, true, true)
CUPYPREP_WARP_FLOAT_KERNEL(affine, false, cubic, warp_cubic, cubic_first, false, false)
CUPYPREP_WARP_KERNEL(affine, false, nearest_fixed, (warp_nearest_fixed<T, CN, P>(it, d_c, border, bval, block_w)))
CUPYPREP_WARP_KERNEL(affine, false, linear_fixed, (warp_linear_fixed<T, CN, P>(it, d_c, border, bval, itab, ftab, block_w)))
CUPYPREP_WARP_FLOAT_KERNEL(perspective, true, nearest, warp_nearest, nearest_first, false, true)
CUPYPREP_WARP_FLOAT_KERNEL(perspective, true, linear, warp_linear, linear_first, true, true)
CUPYPREP_WARP_FLOAT_KERNEL(perspective, true, cubic, warp_cubic, cubic_first, false, false)
CUPYPREP_WARP_KERNEL(perspective, true, nearest_fixed, (warp_nearest_fixed<T, CN, P>(it, d_c, border, bval, block_w)))
CUPYPREP_WARP_KERNEL(perspective, true, linear_fixed, (warp_linear_fixed<T, CN, P>(it, d_c, border, bval, itab, ftab, block_w)))

// --- uint8 linear affine warps, constant border: the tile's source box in shared memory ---
#if defined(CUPYPREP_STAGED_TRACE)
// development only (benchmarks/staged_dev.py): each block's start, plan, copy and end
// times, its SM and its tile's action
__device__ unsigned long long cupyprep_staged_trace[8 << 16];
__device__ __forceinline__ unsigned long long staged_now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__shared__ unsigned long long staged_trace_plan, staged_trace_copy;
__shared__ int staged_trace_action;
#endif
// cupyprep_warp_affine_linear_staged<T = uint8, CN, LIST, BLOCKS> (CN 3 or 4; dense sources whose
// first byte and row stride are multiples of 4, in every source of a list; dense outputs).
// A block of kStagedThreads makes a kStagedTile-square output tile. Its taps lie in a box of
// source pixels bounded from the tile's corners (below); the block copies that box into
// shared memory once, a pixel a 32-bit word (its CN bytes, then garbage for 3 channels),
// with the border value in every word outside the image, and then makes each output pixel
// from four words there with warp_linear's arithmetic (blend_biased), whatever its taps:
// inside, across the border or wholly outside, all the same instructions. A tile whose box
// lies wholly outside the image is the border value; one whose box does not fit the buffer
// (a zoom-out) is made as four tiles of half the side, and a half tile that does not fit
// either (or copies far more than it reads, or whose coordinates are not finite, or whose
// image's byte offsets pass 32 bits) pixel by pixel as the dense kernel makes them
// (staged_direct). The tiles in order, image by image and row by row, are the launch's work:
// its first `grouped` blocks make `group` consecutive tiles each, one after another, and the
// blocks after them one tile each (the host's geometry._staged_launch; a grid smaller than
// that loops over more). Threads 0 to group - 1 work out what their tiles' threads share
// (StagedShared) side by side before the plan's barrier, so a block's later tiles wait for
// no plan (a block's tiles are neighbours in a row of tiles); the single tiles at the end
// keep the launch's last blocks short.
//
// The box: every pixel's float coordinate (either of OpenCV's formulas, body or tail) lies
// within 3 units in the last place of |m0 x| + |m1 y| + |m2| (three roundings) of the exact
// m0 x + m1 y + m2 of the float matrix, which is affine, so its extremes over the tile are
// at the corners; staged_box takes those, widened by a margin of that sum, floors them, and
// adds the second tap's column and row. Its columns start on a multiple of kStagedGroup
// (the copy's unit). Coordinates inside a box that meets the image are below 2^21 in size,
// where s + 1.5 * 2^23 rounded down is exactly 1.5 * 2^23 + floor(s), so the floor and the
// tap's word come from that sum's bit pattern, as in the dense fast path.
namespace {

constexpr int kStagedThreads = 256, kStagedWarps = kStagedThreads / 32;
constexpr int kStagedTile = 64, kStagedHalf = kStagedTile / 2;
constexpr int kStagedGroup = 4;  // pixels the copy moves at a time (3 or 4 words)
// Words from one row of the box to the next, the same for every box (a compile-time
// constant: a pixel's second row of taps is an immediate offset from its first): 4 times an
// odd number, so the copy's 16-byte stores stay aligned, and 12 mod 32, which spreads a
// warp's gathers over the banks best (a bank model of W5's angles: 2.55 wavefronts a
// request, 2.6 for 4 times other odd numbers, 3.6 at 0 mod 32). 27 groups: a 64-square
// tile's box at 45 degrees and scale 0.9 is 101 pixels wide.
constexpr int kStagedPitch = 108;

// What a block does with a tile: stage its box, fill it with the border value, or split it.
enum { STAGE = 0, FILL = 1, SPLIT = 2 };

struct StagedBox {
    int x0, y0;   // source pixel of the box's first word (x0 a multiple of kStagedGroup)
    int groups;   // kStagedGroup-pixel groups a row
    int rows;
    int action;
    int inside;   // the box lies in the image: no pixel's taps cross its border
    int rows_par;  // rows the copy moves at a time (a row's groups to a thread each)
    float rcp;    // 1 / groups, which splits a thread's index into row and group
    // 0x4B000000, the exponent byte of 2^23 that makes a byte b the float 2^23 + b: read
    // from here, it stays in a register, and each byte's __byte_perm keeps its selector as
    // an immediate (as a constant, the compiler made it the immediate and moved the three
    // selectors into registers for every pixel)
    unsigned exponent;
};

// What a thread of the first warp works out for one of the block's tiles, read by every
// thread after the plan's barrier: the tile's place, its image (fields, the matrix as
// floats) and its plan. Every warp working these out itself took about 180 instructions a
// warp a tile, 12% of W5's, the same in every warp of a block.
struct StagedTileFields {
    StagedBox tile;  // the tile's plan
    const unsigned char* img;
    unsigned char* image_out;
    cp::i64 s_y;
    int h, w;
    float m[6];
    int ox, oy;
    int flags;  // STAGED_OFFSETS32 | STAGED_VEC_SRC | STAGED_WORDS | STAGED_VEC16
};
// The most tiles a block makes in turn (the host's geometry._STAGED_MOST_TILES)
constexpr int kStagedMostTiles = 8;
// The block's shared fields: its tiles', a split tile's quarters' plans, and the border
// value's words (thread 0's, once a block).
template <int CN>
struct StagedShared {
    StagedTileFields t[kStagedMostTiles];
    StagedBox plan[4];
    unsigned fill, fw[3];
    unsigned bv[CN];
};
enum { STAGED_OFFSETS32 = 1, STAGED_VEC_SRC = 2, STAGED_WORDS = 4, STAGED_VEC16 = 8 };

// Each warp's two output rows, CN bytes a pixel, before their 16-byte stores
// (staged_pixels_out).
__host__ __device__ constexpr int staged_out_bytes(int cn) {
    return kStagedWarps * 2 * kStagedTile * cn;
}
// The box's words, whole rows of kStagedPitch, for BLOCKS blocks of the kernel an SM (its
// template parameter, the launch bound): at most 104 rows for 5, 112 for 4, and no more
// than fit beside the output rows and the block's shared fields in the 48 KB of static
// shared memory a block may take (3 channels: 104 rows, 4: 101; W5's tallest box has 101).
__host__ __device__ constexpr int staged_words(int blocks, int cn) {
    const int most = blocks >= 5 ? 104 : 112;
    const int fields = (cn == 3 ? (int)sizeof(StagedShared<3>) : (int)sizeof(StagedShared<4>))
#if defined(CUPYPREP_STAGED_TRACE)
                       + 32
#endif
        ;
    const int fit = (49152 - staged_out_bytes(cn) - fields) / (4 * kStagedPitch);
    return (most < fit ? most : fit) * kStagedPitch;
}
// A half tile is staged only where its box copies at most this many words a pixel (a
// zoom-out copies more than it reads): staged_direct makes it otherwise.
constexpr int kStagedRatio = 3;
constexpr unsigned kFloorBits = kRoundBits;  // 1.5 * 2^23, kRound

// A plan that stages nothing: FILL or SPLIT (staged_box fills in the rest for STAGE).
__device__ __forceinline__ StagedBox staged_plan(int action) {
    return StagedBox{0, 0, 0, 0, action, 0, 1, 1.f, kTwo23Bits};
}

struct StagedImage {
    const unsigned char* img;
    int h, w;
    cp::i64 s_y;
};

// The box of output pixels [x0, x1] x [y0, y1] (inclusive) under the float matrix m (see
// above; the corners' m0 x + m1 y + m2 are worked out in float32 too, within another 4
// units in the last place of the sum, so the margin is 2^-18 of it, 8 times the two
// bounds together). `words`: the most a box may take, `copied`: the most it may copy.
__device__ __forceinline__ StagedBox staged_box(const float (&m)[6], int x0, int y0, int x1,
                                                int y1, int sw, int sh, int words, int copied,
                                                bool offsets32) {
    float lo[2], hi[2], e[2];
    bool finite = true;
#pragma unroll
    for (int a = 0; a < 2; ++a) {
        const float* r = m + 3 * a;
        const float p0 = __fmul_rn(r[0], (float)x0), p1 = __fmul_rn(r[0], (float)x1);
        const float q0 = __fmul_rn(r[1], (float)y0), q1 = __fmul_rn(r[1], (float)y1);
        const float v00 = __fadd_rn(__fadd_rn(p0, q0), r[2]), v10 = __fadd_rn(__fadd_rn(p1, q0), r[2]);
        const float v01 = __fadd_rn(__fadd_rn(p0, q1), r[2]), v11 = __fadd_rn(__fadd_rn(p1, q1), r[2]);
        lo[a] = fminf(fminf(v00, v10), fminf(v01, v11));
        hi[a] = fmaxf(fmaxf(v00, v10), fmaxf(v01, v11));
        const float sum = fmaxf(fabsf(p0), fabsf(p1)) + fmaxf(fabsf(q0), fabsf(q1)) + fabsf(r[2]);
        // fminf / fmaxf drop a NaN: test each corner (an infinity fails this too)
        finite = finite && fabsf(v00) < 1e30f && fabsf(v10) < 1e30f && fabsf(v01) < 1e30f &&
                 fabsf(v11) < 1e30f && sum < 1e30f;
        e[a] = sum * 0x1p-18f;
    }
    StagedBox b = staged_plan(SPLIT);
    if (!finite) return b;  // split, then made by staged_direct, which tames them
#pragma unroll
    for (int a = 0; a < 2; ++a) {
        lo[a] = floorf(lo[a] - e[a]);
        hi[a] = floorf(hi[a] + e[a]) + 1.f;  // the second tap
    }
    // every tap outside the image
    if (hi[0] < 0.f || lo[0] >= (float)sw || hi[1] < 0.f || lo[1] >= (float)sh) {
        b.action = FILL;
        return b;
    }
    const float lim = 2097152.f;  // 2^21
    if (!(lo[0] > -lim && hi[0] < lim && lo[1] > -lim && hi[1] < lim)) return b;
    b.x0 = (int)lo[0] & ~(kStagedGroup - 1);
    b.y0 = (int)lo[1];
    b.groups = ((int)hi[0] - b.x0) / kStagedGroup + 1;
    b.rows = (int)hi[1] - b.y0 + 1;
    if (kStagedGroup * b.groups <= kStagedPitch && b.rows * kStagedPitch <= words &&
        kStagedGroup * b.groups * b.rows <= copied && offsets32) {
        b.action = STAGE;
        b.inside = b.x0 >= 0 && b.y0 >= 0 && b.x0 + kStagedGroup * b.groups <= sw &&
                   b.y0 + b.rows <= sh;
        b.rows_par = kStagedThreads / b.groups;
        b.rcp = __frcp_rn((float)b.groups);
    }
    return b;
}

// Pixel x of a source row as one word (its CN bytes at the bottom) or the border word.
template <int CN>
__device__ __forceinline__ unsigned staged_pixel(const unsigned char* row, int x, int w,
                                                 unsigned fill) {
    if ((unsigned)x >= (unsigned)w) return fill;
    const unsigned char* p = row + (cp::i64)x * CN;
    unsigned v = 0;
#pragma unroll
    for (int c = 0; c < CN; ++c) v |= (unsigned)__ldg(p + c) << (8 * c);
    return v;
}

// K rows of the copy's thread (below) from row y on, rows rp apart, those before `end`: all
// their loads issued before any is used. A row is loaded where it lies before `lim` (at
// most the image's height and `end`; a row above the image is negative, past it as
// unsigned) and the group inside the image (x_in), else it is the border value. INSIDE (a
// box inside the image): every row is loaded unconditionally, rows past `lim` (then the
// box's last row) as that row, and only the stores wait for `end`: no border words to
// start from and no tests before the loads.
template <int CN, bool VEC, int K, bool INSIDE>
__device__ __forceinline__ void staged_copy_rows(const StagedImage& s, bool x_in, int xo, int y,
                                                 int rp, int lim, int end, unsigned* out,
                                                 unsigned fill, const unsigned (&fw)[3]) {
    const int s_y = (int)s.s_y;
    unsigned w[K][CN];
#pragma unroll
    for (int j = 0; j < K; ++j) {
        const int yj = INSIDE ? min(y + j * rp, lim) : y + j * rp;
        if (!INSIDE) {
#pragma unroll
            for (int c = 0; c < CN; ++c) w[j][c] = CN == 3 ? fw[c] : fill;
        }
        if (INSIDE || (x_in && (unsigned)yj < (unsigned)lim)) {
            const unsigned* q = reinterpret_cast<const unsigned*>(s.img + (unsigned)(yj * s_y + xo));
            if constexpr (VEC) {  // 4 channels, rows on 16 bytes: the group in one load
                const uint4 v = __ldg(reinterpret_cast<const uint4*>(q));
                w[j][0] = v.x, w[j][1] = v.y, w[j][2] = v.z, w[j][3] = v.w;
            } else {
#pragma unroll
                for (int c = 0; c < CN; ++c) w[j][c] = __ldg(q + c);
            }
        }
    }
#pragma unroll
    for (int j = 0; j < K; ++j) {
        if (y + j * rp < end) {
            uint4* o = reinterpret_cast<uint4*>(out + j * rp * kStagedPitch);
            if constexpr (CN == 3)
                *o = make_uint4(w[j][0], __funnelshift_r(w[j][0], w[j][1], 24),
                                __funnelshift_r(w[j][1], w[j][2], 16), w[j][2] >> 8);
            else
                *o = make_uint4(w[j][0], w[j][1], w[j][2], w[j][3]);
        }
    }
}

// The copy's turns from row y (the thread's) and yw (its warp's first thread's) on: 8 rows
// a thread at a time while the warp's first thread has more than 4 left (one group at a
// time, each waited for its loads in turn: 45% of W5's stall samples), then its last 2 to
// 4 or 1 in one turn of 4 or 1 (W5: 1.11 times the rows the warps need; 8 a turn
// throughout, 1.42 times).
template <int CN, bool VEC, bool INSIDE>
__device__ __forceinline__ void staged_copy_turns(const StagedImage& s, bool x_in, int xo, int y,
                                                  int yw, int rp, int y_end, int lim, int end,
                                                  unsigned* out, unsigned fill,
                                                  const unsigned (&fw)[3]) {
    for (; yw + 4 * rp < y_end; y += 8 * rp, yw += 8 * rp, out += 8 * rp * kStagedPitch)
        staged_copy_rows<CN, VEC, 8, INSIDE>(s, x_in, xo, y, rp, lim, end, out, fill, fw);
    if (yw + rp < y_end)
        staged_copy_rows<CN, VEC, 4, INSIDE>(s, x_in, xo, y, rp, lim, end, out, fill, fw);
    else if (yw < y_end)
        staged_copy_rows<CN, VEC, 1, INSIDE>(s, x_in, xo, y, rp, lim, end, out, fill, fw);
}

// The block copies box b of image s into `box`: thread t takes group t % groups of rows
// t / groups, t / groups + rows_par, ... (so a warp's 16-byte stores are adjacent), and
// knows once where its column lies against the image. A group inside the image comes as
// the CN aligned words that hold it (VEC, 4 channels of a source whose first byte and row
// stride are multiples of 16: as one 16-byte word), every other as the border value; then
// the threads whose groups cross the image's right edge redo theirs pixel by pixel. Rows
// kStagedPitch words apart: 4 times an odd number keeps the 16-byte stores free of bank
// conflicts. fw: the border value's pattern words (staged_fill), which the 3-channel
// unpacking turns into 4 border words.
template <int CN, bool VEC>
__device__ __forceinline__ void staged_copy(const StagedImage& s, const StagedBox& b,
                                            unsigned* box, unsigned fill,
                                            const unsigned (&fw)[3]) {
    const int rp = b.rows_par;
    // t / groups: (t + 1/2) / groups is at least 1 / (2 groups) from a whole number, far
    // more than the product's rounding
    const int r0 = (int)__fmul_rn((float)threadIdx.x + 0.5f, b.rcp);
    // the first row of the warp's first thread, which has the most rows of the warp: the
    // loop below runs by it, the same for the whole warp (a lane with fewer leaves its last
    // row out; one past the last whole row of groups, all of them)
    const int rw = (int)__fmul_rn((float)(threadIdx.x & ~31u) + 0.5f, b.rcp);
    if (rw >= rp) return;
    int yw = b.y0 + rw;
    const int g = threadIdx.x - r0 * b.groups;
    const int x = b.x0 + kStagedGroup * g;
    const bool x_in = x >= 0 && x <= s.w - kStagedGroup;
    // byte offsets of pixels inside the image fit 32 bits (staged_box)
    const int xo = x * CN;
    const int y_end = b.y0 + b.rows, end = r0 < rp ? y_end : b.y0;
    unsigned* const first = box + r0 * kStagedPitch + kStagedGroup * g;
    unsigned* out = first;
    int y = b.y0 + r0;
    if (b.inside) {  // every group inside the image (x_in), rows up to y_end - 1 too
        staged_copy_turns<CN, VEC, true>(s, true, xo, y, yw, rp, y_end, y_end - 1, end, out, fill, fw);
        return;
    }
    // rows from lim on are not loaded: lim is at least 0, so no row is below 0 as unsigned
    staged_copy_turns<CN, VEC, false>(s, x_in, xo, y, yw, rp, y_end, max(min(end, s.h), 0), end, out,
                                      fill, fw);
    if (r0 >= rp || x_in || x >= s.w || x <= -kStagedGroup) return;
    // across the image's right edge: the rows inside the image, pixel by pixel (the loop
    // above stored the border value in the others)
    out = first;
    for (y = b.y0 + r0; y < y_end; y += rp, out += rp * kStagedPitch) {
        if ((unsigned)y < (unsigned)s.h) {
            const unsigned char* row = s.img + y * (int)s.s_y;
            *reinterpret_cast<uint4*>(out) = make_uint4(
                staged_pixel<CN>(row, x, s.w, fill), staged_pixel<CN>(row, x + 1, s.w, fill),
                staged_pixel<CN>(row, x + 2, s.w, fill), staged_pixel<CN>(row, x + 3, s.w, fill));
        }
    }
}

// One output pixel at source (sx, sy) from the staged box b: its CN values in low bytes.
template <int CN>
__device__ __forceinline__ void staged_blend(const unsigned* box, const StagedBox& b, unsigned bias,
                                             float sx, float sy, unsigned (&v)[CN]) {
    const float tx = __fadd_rd(sx, kRound), ty = __fadd_rd(sy, kRound);
    const float a = __fsub_rn(sx, __fsub_rn(tx, kRound)), c = __fsub_rn(sy, __fsub_rn(ty, kRound));
    unsigned w00, w01, w10, w11;
#if defined(CUPYPREP_EMULATOR)
    const unsigned k = __float_as_uint(ty) * (unsigned)kStagedPitch + __float_as_uint(tx) + bias;
    // every tap inside the words this tile copied
    assert(k / kStagedPitch + 1u < (unsigned)b.rows &&
           k % kStagedPitch + 1u < (unsigned)(kStagedGroup * b.groups));
    const unsigned* p0 = box + k;
    w00 = p0[0], w01 = p0[1], w10 = p0[kStagedPitch], w11 = p0[kStagedPitch + 1];
#else
    // the first tap's shared-memory address in 32-bit arithmetic: bias holds the box's
    // address and its origin's bit patterns, in bytes (two instructions, not four with the
    // generic address of the box)
    const unsigned at = __float_as_uint(ty) * (4u * kStagedPitch) + __float_as_uint(tx) * 4u + bias;
    asm("ld.shared.u32 %0, [%4];\n\t"
        "ld.shared.u32 %1, [%4+4];\n\t"
        "ld.shared.u32 %2, [%4+%5];\n\t"
        "ld.shared.u32 %3, [%4+%6];"
        : "=r"(w00), "=r"(w01), "=r"(w10), "=r"(w11)
        : "r"(at), "n"(4 * kStagedPitch), "n"(4 * kStagedPitch + 4));
    (void)box;
#endif
#pragma unroll
    for (int ch = 0; ch < CN; ++ch) {
        const unsigned sel = 0x7440u + ch;
        v[ch] = blend_biased(a, c, __uint_as_float(__byte_perm(w00, b.exponent, sel)),
                             __uint_as_float(__byte_perm(w01, b.exponent, sel)),
                             __uint_as_float(__byte_perm(w10, b.exponent, sel)),
                             __uint_as_float(__byte_perm(w11, b.exponent, sel)));
    }
}

// The bias staged_blend adds to a pixel's floors' bit patterns (1.5 * 2^23 + ix, + iy) for
// its first tap's word in box b; on the device, that word's shared-memory address in bytes.
__device__ __forceinline__ unsigned staged_tap_bias(const unsigned* box, const StagedBox& b) {
    unsigned bias = 0u - (kFloorBits + (unsigned)b.y0) * (unsigned)kStagedPitch -
                    (kFloorBits + (unsigned)b.x0);
#if !defined(CUPYPREP_EMULATOR)
    bias = bias * 4u + (unsigned)__cvta_generic_to_shared(box);
    asm("mov.b32 %0, %0;" : "+r"(bias));  // one term: each pixel's address is 2 instructions
#endif
    return bias;
}

// One output pixel at source (sx, sy): the border value where EDGE and every tap lies
// outside the w x h image (warp_linear's test), else blended from box b.
template <int CN, bool EDGE>
__device__ __forceinline__ void staged_value(const unsigned* box, const StagedBox& b, unsigned bias,
                                             float sx, float sy, float w, float h,
                                             const unsigned (&bv)[CN], unsigned (&v)[CN]) {
    if (EDGE && (sx < -1.f || sx >= w || sy < -1.f || sy >= h)) {
#pragma unroll
        for (int c = 0; c < CN; ++c) v[c] = bv[c];
    } else {
        staged_blend<CN>(box, b, bias, sx, sy, v);
    }
}

template <int CN>
__device__ __forceinline__ void staged_store(unsigned char* out, bool words, const unsigned (&v)[CN]) {
    if constexpr (CN == 4) {
        if (words) {
            const unsigned lo = __byte_perm(v[0], v[1], 0x0040u), hi = __byte_perm(v[2], v[3], 0x0040u);
            *reinterpret_cast<unsigned*>(out) = __byte_perm(lo, hi, 0x5410u);
            return;
        }
    }
#pragma unroll
    for (int c = 0; c < CN; ++c) out[c] = (unsigned char)v[c];
}

// The block makes output pixels [ox, ox + S) x [oy, oy + S) (those inside dw x dh) from
// box b, staged: each half warp takes 16 adjacent pixels of a row (their taps then run
// along the box, few to a bank), the two halves adjacent rows; a thread makes S / 16
// pixels of a row, 16 apart, and every kRowStep-th row (the row's terms worked out once for
// them). BODY: every pixel of the tile lies in OpenCV's SIMD body. EDGE (a box not inside
// the image): a pixel whose taps all lie outside the image (a constant border's value:
// warp_linear's test) is stored without its taps, so a warp wholly outside skips them
// (inside the image no pixel is, and the test is left out).
template <int CN, int S, bool BODY, bool EDGE>
__device__ __forceinline__ void staged_pixels(const unsigned* box, const StagedBox& b,
                                              const float (&m)[6], int sw, int sh, int ox,
                                              int oy, int dw, int dh, int body_end,
                                              unsigned char* image_out, cp::i64 d_y, bool words,
                                              const unsigned (&bv)[CN]) {
    constexpr int kPer = S / 16;  // a thread's pixels in a row
    constexpr int kRowStep = 2 * kStagedWarps;
    const int x0 = ox + (threadIdx.x & 15), y0 = oy + (threadIdx.x >> 4);
    if (x0 >= dw || y0 >= dh) return;
    const unsigned bias = staged_tap_bias(box, b);
    const float w = (float)sw, h = (float)sh;  // exact: below 2^21 where a box is staged
    const int y_end = min(oy + S, dh);
    float fx[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) fx[j] = (float)(x0 + 16 * j);
    // every column of the thread inside (in OpenCV's body, which ends by the output's end)
    const bool full = BODY || x0 + 16 * (kPer - 1) < dw;
    float fy = (float)y0;
    unsigned char* out = image_out + (cp::i64)y0 * d_y + (cp::i64)x0 * CN;
    const cp::i64 out_step = (cp::i64)kRowStep * d_y;
    for (int y = y0; y < y_end; y += kRowStep, fy += (float)kRowStep, out += out_step) {
        const float py = __fmul_rn(fy, m[1]), qy = __fmul_rn(fy, m[4]);
        const float rx = __fadd_rn(py, m[2]), ry = __fadd_rn(qy, m[5]);
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
            if (j == 0 || full || x0 + 16 * j < dw) {
                float sx, sy;
                if (BODY || x0 + 16 * j < body_end) {
                    sx = __fmaf_rn(m[0], fx[j], rx);
                    sy = __fmaf_rn(m[3], fx[j], ry);
                } else {
                    sx = __fadd_rn(__fmaf_rn(fx[j], m[0], py), m[2]);
                    sy = __fadd_rn(__fmaf_rn(fx[j], m[3], qy), m[5]);
                }
                unsigned v[CN];
                staged_value<CN, EDGE>(box, b, bias, sx, sy, w, h, bv, v);
                staged_store<CN>(out + j * 16 * CN, words, v);
            }
        }
    }
}

// staged_pixels for a kStagedTile-square part wholly inside an output whose rows start on
// 16 bytes, in OpenCV's body: each warp puts its two rows' bytes in its own stretch of
// shared memory `stage` (2 kStagedTile CN bytes) and writes them as 16-byte stores, each
// lane one, whole rows of 16-byte words (not CN byte stores a pixel).
template <int CN, bool EDGE>
__device__ __forceinline__ void staged_pixels_out(const unsigned* box, const StagedBox& b,
                                                  const float (&m)[6], int sw, int sh, int ox,
                                                  int oy, unsigned char* image_out, cp::i64 d_y,
                                                  unsigned char* stage, const unsigned (&bv)[CN]) {
    constexpr int S = kStagedTile, kPer = S / 16, kRowStep = 2 * kStagedWarps;
    constexpr int kRowVecs = S * CN / 16;  // 16-byte words a row
    const int lane = threadIdx.x & 31;
    const int x0 = ox + (threadIdx.x & 15), y0 = oy + (threadIdx.x >> 4);
    const unsigned bias = staged_tap_bias(box, b);
    const float w = (float)sw, h = (float)sh;
    float fx[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) fx[j] = (float)(x0 + 16 * j);
    unsigned char* const mine = stage + (lane >> 4) * (S * CN) + (lane & 15) * CN;
    // the lane's 16-byte word of the warp's two rows
    const int vr = lane / kRowVecs, vq = lane - vr * kRowVecs;
    const uint4* const from = reinterpret_cast<const uint4*>(stage) + lane;
    uint4* to = reinterpret_cast<uint4*>(image_out + (cp::i64)(oy + ((threadIdx.x >> 5) << 1) + vr) * d_y +
                                         (cp::i64)ox * CN) + vq;
    const cp::i64 to_step = (cp::i64)kRowStep * d_y;
    float fy = (float)y0;
#pragma unroll 1
    for (int y = y0; y < oy + S; y += kRowStep, fy += (float)kRowStep) {
        const float py = __fmul_rn(fy, m[1]), qy = __fmul_rn(fy, m[4]);
        const float rx = __fadd_rn(py, m[2]), ry = __fadd_rn(qy, m[5]);
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
            const float sx = __fmaf_rn(m[0], fx[j], rx), sy = __fmaf_rn(m[3], fx[j], ry);
            unsigned v[CN];
            staged_value<CN, EDGE>(box, b, bias, sx, sy, w, h, bv, v);
#pragma unroll
            for (int c = 0; c < CN; ++c) mine[16 * CN * j + c] = (unsigned char)v[c];
        }
        __syncwarp();
        if (vr < 2) *to = *from;
        to = reinterpret_cast<uint4*>(reinterpret_cast<unsigned char*>(to) + to_step);
        __syncwarp();
    }
}

// The part [ox, ox + S) x [oy, oy + S) (what of it lies inside dw x dh) as the border
// value. A part wholly inside an output whose rows start on 16 bytes (vec16) goes as 16-byte
// stores: its rows start on them too (S * CN is a multiple of 16 bytes), and for 3 channels
// the value's bytes repeat every 3 words, from a row's first byte on (fw: those 3 words).
template <int CN, int S>
__device__ __forceinline__ void staged_fill(int ox, int oy, int dw, int dh, unsigned char* image_out,
                                            cp::i64 d_y, bool words, bool vec16,
                                            const unsigned (&bv)[CN], const unsigned (&fw)[3]) {
    if (vec16 && ox + S <= dw && oy + S <= dh) {
        constexpr int kRowVecs = S * CN / 16;
        static_assert(kRowVecs * 16 == S * CN, "whole 16-byte stores a row");
        const unsigned f0 = fw[0], f1 = fw[1], f2 = fw[2];
        // thread t stores 16-byte word t % kRowVecs of rows t / kRowVecs + j kRows
        constexpr int kRows = kStagedThreads / kRowVecs;
        const int r0 = threadIdx.x / kRowVecs, v = threadIdx.x - r0 * kRowVecs;
        if (r0 >= kRows) return;
        const int k = CN == 3 ? v % 3 : 0;  // the word of the 3 that starts this store
        const uint4 q = make_uint4(k == 0 ? f0 : (k == 1 ? f1 : f2), k == 0 ? f1 : (k == 1 ? f2 : f0),
                                   k == 0 ? f2 : (k == 1 ? f0 : f1), k == 0 ? f0 : (k == 1 ? f1 : f2));
        uint4* o = reinterpret_cast<uint4*>(image_out + (cp::i64)(oy + r0) * d_y + (cp::i64)ox * CN) + v;
        const cp::i64 step = (cp::i64)kRows * d_y;
#pragma unroll 1
        for (int r = r0; r < S; r += kRows) {
            *o = q;
            o = reinterpret_cast<uint4*>(reinterpret_cast<unsigned char*>(o) + step);
        }
        return;
    }
#pragma unroll 1
    for (int i = threadIdx.x; i < S * S; i += kStagedThreads) {
        const int x = ox + i % S, y = oy + i / S;
        if (x < dw && y < dh) staged_store<CN>(image_out + (cp::i64)y * d_y + (cp::i64)x * CN, words, bv);
    }
}

// A half tile whose box does not fit, or would copy far more than it reads (a zoom-out), or
// whose coordinates are not finite: pixel by pixel, each reading its own taps as the dense
// kernel does (linear_fast inside the image, the border value where every tap is outside,
// linear_edge or warp_linear across the border).
// Out of line, with its arguments by value (a reference would put the caller's copies in
// local memory for the whole kernel).
template <int CN>
__device__ __noinline__ void staged_direct(const unsigned char* img, int sh, int sw, cp::i64 s_y,
                                           float m0, float m1, float m2, float m3, float m4,
                                           float m5, int ox, int oy, int dw, int dh, int body_end,
                                           unsigned char* image_out, cp::i64 d_y, bool words,
                                           float bv0, float bv1, float bv2, float bv3) {
    const float m[6] = {m0, m1, m2, m3, m4, m5}, bval[4] = {bv0, bv1, bv2, bv3};
    Item<unsigned char> it;
    it.img = img;
    it.h = sh;
    it.w = sw;
    it.s_y = s_y;
    it.s_x = CN;
    it.s_c = 1;
    it.m = nullptr;
#pragma unroll
    for (int j = 0; j < 9; ++j) it.mf[j] = j < 6 ? m[j] : 0.f;
    it.out = nullptr;
    it.x = it.y = 0;
    it.words = false;
    const DenseU8 d = dense_u8_image<true, CN>(it);
    unsigned char fill[CN];
#pragma unroll
    for (int c = 0; c < CN; ++c) fill[c] = (unsigned char)bval[c];
    for (int i = threadIdx.x; i < kStagedHalf * kStagedHalf; i += kStagedThreads) {
        const int x = ox + i % kStagedHalf, y = oy + i / kStagedHalf;
        if (x >= dw || y >= dh) continue;
        float sx, sy;
        float_coords<false>(it.mf, x, y, x < body_end, sx, sy);
        unsigned v[CN];
        if (sx >= 1.f && sx < d.x_hi && sy >= 0.f && sy < d.y_hi) {
            linear_fast<CN>(d, sx, sy, v);
        } else if (outside_u8<true, CN>(d, sx, sy)) {
#pragma unroll
            for (int c = 0; c < CN; ++c) v[c] = fill[c];
        } else if (d.x_hi == d.x_hi) {
            linear_edge<CN, false>(it, d, x, y, CONSTANT, bval, body_end, v);
        } else {
            unsigned char u[CN];
            warp_linear<unsigned char, CN, false, true>(it, x, y, CONSTANT, bval, fill, body_end, u);
#pragma unroll
            for (int c = 0; c < CN; ++c) v[c] = u[c];
        }
        staged_store<CN>(image_out + (cp::i64)y * d_y + (cp::i64)x * CN, words, v);
    }
}

// What one block's call needs, for each part of its tile.
template <int CN>
struct StagedCall {
    StagedImage s;
    float m[6];
    int dw, dh, body_end;
    unsigned char* image_out;
    cp::i64 d_y;
    bool words;
    bool vec16;  // the output's rows start on 16 bytes (staged_fill's stores)
    float bval[4];
    unsigned bv[CN];
    unsigned fill;
    // the border value's bytes repeated from a word's first byte on, 3 words (3 channels:
    // b0 b1 b2 b0, b1 b2 b0 b1, b2 b0 b1 b2; 4 channels: fill)
    unsigned fw[3];
    unsigned* box;
    int capacity;     // the box's words
    bool offsets32;   // the image's byte offsets fit 32 bits (the copy's arithmetic)
    bool vec_src;     // 4 channels: its first byte and row stride are multiples of 16
    StagedBox* plan;  // 4 of them: the tile's, or its quarters'
    unsigned char* out_stage;  // staged_out_bytes(CN): each warp's output rows
};

// The block makes the S-square part at (ox, oy) by plan b (staged or filled; SPLIT: nothing).
// The caller's barrier made b visible; the box is free again when this returns.
template <int CN, int S>
__device__ __forceinline__ void staged_make(const StagedCall<CN>& k, const StagedBox& b, int ox, int oy) {
    if (b.action == STAGE) {
        if (k.vec_src)  // 4 channels only
            staged_copy<CN, CN == 4>(k.s, b, k.box, k.fill, k.fw);
        else
            staged_copy<CN, false>(k.s, b, k.box, k.fill, k.fw);
        __syncthreads();
#if defined(CUPYPREP_STAGED_TRACE)
        if (threadIdx.x == 0) staged_trace_copy = staged_now();
#endif
        const bool body = ox + S <= k.body_end;
        if (S == kStagedTile && body && k.vec16 && oy + S <= k.dh) {  // body: ox + S <= body_end <= dw
            unsigned char* stage = k.out_stage + (threadIdx.x >> 5) * (staged_out_bytes(CN) / kStagedWarps);
            if (b.inside)
                staged_pixels_out<CN, false>(k.box, b, k.m, k.s.w, k.s.h, ox, oy, k.image_out, k.d_y, stage, k.bv);
            else
                staged_pixels_out<CN, true>(k.box, b, k.m, k.s.w, k.s.h, ox, oy, k.image_out, k.d_y, stage, k.bv);
        } else if (body && b.inside)
            staged_pixels<CN, S, true, false>(k.box, b, k.m, k.s.w, k.s.h, ox, oy, k.dw, k.dh,
                                              k.body_end, k.image_out, k.d_y, k.words, k.bv);
        else if (body)
            staged_pixels<CN, S, true, true>(k.box, b, k.m, k.s.w, k.s.h, ox, oy, k.dw, k.dh,
                                             k.body_end, k.image_out, k.d_y, k.words, k.bv);
        else
            staged_pixels<CN, S, false, true>(k.box, b, k.m, k.s.w, k.s.h, ox, oy, k.dw, k.dh,
                                              k.body_end, k.image_out, k.d_y, k.words, k.bv);
        __syncthreads();  // the box is read until here
    } else if (b.action == FILL) {
        staged_fill<CN, S>(ox, oy, k.dw, k.dh, k.image_out, k.d_y, k.words, k.vec16, k.bv, k.fw);
    }
}

// The tile at (ox, oy) by its plan b (thread 0 made it before the caller's barrier): staged
// or filled whole, else as four quarters, each staged, filled or made by staged_direct.
template <int CN>
__device__ __forceinline__ void staged_tile(const StagedCall<CN>& k, const StagedBox& b, int ox,
                                            int oy) {
    if (b.action != SPLIT) {
        staged_make<CN, kStagedTile>(k, b, ox, oy);
        return;
    }
    if (threadIdx.x < 4) {
        const int qx = ox + (threadIdx.x & 1) * kStagedHalf, qy = oy + (threadIdx.x >> 1) * kStagedHalf;
        StagedBox q = staged_plan(FILL);  // a quarter past the output's end
        if (qx < k.dw && qy < k.dh)
            q = staged_box(k.m, qx, qy, min(qx + kStagedHalf, k.dw) - 1, min(qy + kStagedHalf, k.dh) - 1,
                           k.s.w, k.s.h, k.capacity, kStagedRatio * kStagedHalf * kStagedHalf,
                           k.offsets32);
        k.plan[threadIdx.x] = q;
    }
    __syncthreads();
    for (int q = 0; q < 4; ++q) {
        const int qx = ox + (q & 1) * kStagedHalf, qy = oy + (q >> 1) * kStagedHalf;
        const StagedBox p = k.plan[q];
        if (p.action == SPLIT)
            staged_direct<CN>(k.s.img, k.s.h, k.s.w, k.s.s_y, k.m[0], k.m[1], k.m[2], k.m[3], k.m[4],
                              k.m[5], qx, qy, k.dw, k.dh, k.body_end, k.image_out, k.d_y, k.words,
                              k.bval[0], k.bval[1], k.bval[2], k.bval[3]);
        else
            staged_make<CN, kStagedHalf>(k, p, qx, qy);
    }
    __syncthreads();  // the plans are read until here
}

}  // namespace

template <typename T, int CN, bool LIST, int BLOCKS>
__global__ void __launch_bounds__(kStagedThreads, BLOCKS)
cupyprep_warp_affine_linear_staged(CUPYPREP_WARP_PARAMS, int group, int grouped) {
#if defined(CUPYPREP_STAGED_TRACE)
    const unsigned long long trace_start = staged_now();
#endif
    static_assert(sizeof(T) == 1 && (CN == 3 || CN == 4), "uint8, 3 or 4 channels");
    __shared__ __align__(16) unsigned box[staged_words(BLOCKS, CN)];
    __shared__ __align__(16) unsigned char out_stage[staged_out_bytes(CN)];
    __shared__ StagedShared<CN> shared;
    const int tiles_x = (dw + kStagedTile - 1) / kStagedTile;
    const int per_image = tiles_x * ((dh + kStagedTile - 1) / kStagedTile);
    // work items: the first `grouped` make `group` tiles each, the rest one (the host keeps
    // n_out * per_image below 2^31)
    const int items = n_out * per_image - (group - 1) * grouped;
    if (threadIdx.x == 0) {  // the border value's words, once a block
        unsigned fill = 0;
#pragma unroll
        for (int c = 0; c < CN; ++c) {
            const float bval = c == 0 ? bv0 : (c == 1 ? bv1 : (c == 2 ? bv2 : bv3));
            shared.bv[c] = (unsigned)bval;  // whole numbers in [0, 255] for uint8
            fill |= shared.bv[c] << (8 * c);
        }
        shared.fill = fill;
        shared.fw[0] = CN == 3 ? __byte_perm(fill, 0u, 0x0210u) : fill;
        shared.fw[1] = CN == 3 ? __byte_perm(fill, 0u, 0x1021u) : fill;
        shared.fw[2] = CN == 3 ? __byte_perm(fill, 0u, 0x2102u) : fill;
    }
    for (int i = blockIdx.x; i < items; i += gridDim.x) {
        const int first = i < grouped ? group * i : i + (group - 1) * grouped;
        const int count = i < grouped ? group : 1;
        if (threadIdx.x < count) {
            // thread j of the first warp: the fields and plan of the item's tile j (the lanes
            // work them out side by side, in the time of one)
            const int t = first + threadIdx.x;
            const int n = t / per_image, r = t - n * per_image;
            const int ty = r / tiles_x, ox = (r - ty * tiles_x) * kStagedTile, oy = ty * kStagedTile;
            StagedTileFields& f = shared.t[threadIdx.x];
            const Item<T> it = image_item<T>(n, src, LIST, src_table, src_list.v, sh, sw, s_n, s_y,
                                             s_x, s_c, src_index, mats, mat_step, mat_value.v);
            float m[6];
#pragma unroll
            for (int j = 0; j < 6; ++j) f.m[j] = m[j] = (float)it.m[j];
            const bool offsets32 =
                (cp::i64)it.h * (it.s_y < 0 ? -it.s_y : it.s_y) + (cp::i64)it.w * CN < (1ll << 31);
            unsigned char* const image_out = reinterpret_cast<unsigned char*>(dst) + (cp::i64)n * d_n;
            const unsigned long long out_bits = (unsigned long long)image_out | (unsigned long long)d_y;
            f.img = it.img;
            f.image_out = image_out;
            f.s_y = it.s_y;
            f.h = it.h;
            f.w = it.w;
            f.ox = ox;
            f.oy = oy;
            f.flags = (offsets32 ? STAGED_OFFSETS32 : 0) |
                      (CN == 4 && (((unsigned long long)it.img | (unsigned long long)it.s_y) & 15u) == 0
                           ? STAGED_VEC_SRC : 0) |
                      (CN == 4 && (out_bits & 3u) == 0 ? STAGED_WORDS : 0) |
                      ((out_bits & 15u) == 0 ? STAGED_VEC16 : 0);
            f.tile = staged_box(m, ox, oy, min(ox + kStagedTile, dw) - 1, min(oy + kStagedTile, dh) - 1,
                                it.w, it.h, staged_words(BLOCKS, CN), staged_words(BLOCKS, CN),
                                offsets32);
        }
        __syncthreads();
#pragma unroll 1
        for (int j = 0; j < count; ++j) {
            const StagedTileFields& f = shared.t[j];
            StagedCall<CN> k;
            k.s = {f.img, f.h, f.w, f.s_y};
#pragma unroll
            for (int e = 0; e < 6; ++e) k.m[e] = f.m[e];
            k.dw = dw, k.dh = dh, k.body_end = body_end, k.d_y = d_y;
            k.image_out = f.image_out;
            const int flags = f.flags;
            k.words = (flags & STAGED_WORDS) != 0;
            k.vec16 = (flags & STAGED_VEC16) != 0;
            k.offsets32 = (flags & STAGED_OFFSETS32) != 0;
            k.vec_src = (flags & STAGED_VEC_SRC) != 0;
            k.bval[0] = bv0, k.bval[1] = bv1, k.bval[2] = bv2, k.bval[3] = bv3;
#pragma unroll
            for (int c = 0; c < CN; ++c) k.bv[c] = shared.bv[c];
            k.fill = shared.fill;
            k.fw[0] = shared.fw[0], k.fw[1] = shared.fw[1], k.fw[2] = shared.fw[2];
            k.box = box;
            k.capacity = staged_words(BLOCKS, CN);
            k.plan = shared.plan;
            k.out_stage = out_stage;
            const StagedBox b = f.tile;
            const int ox = f.ox, oy = f.oy;
#if defined(CUPYPREP_STAGED_TRACE)
            if (threadIdx.x == 0 && j == 0) {
                staged_trace_plan = staged_trace_copy = staged_now();
                staged_trace_action = b.action + (b.inside ? 8 : 0);
            }
#endif
            staged_tile<CN>(k, b, ox, oy);
        }
        // the fields are read until here (a barrier right after reading them, before the
        // copy, made W5 1.4% slower)
        __syncthreads();
    }
#if defined(CUPYPREP_STAGED_TRACE)
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        unsigned long long* t = cupyprep_staged_trace + 8ull * blockIdx.x;
        t[0] = trace_start, t[1] = staged_trace_plan, t[2] = staged_trace_copy, t[3] = staged_now();
        t[4] = sm, t[5] = staged_trace_action;
    }
#endif
}

// --- matrices made on the device: random_affine, estimate_similarity / align_faces ---
namespace {

// invertAffineTransform of m (row-major 2 x 3) into v, each operation rounded on its own
// as geometry.py's _invert_affine (the CPU path's and OpenCV's formula): D = 1 / det, or 0
// for a singular m (returns false).
__device__ __forceinline__ bool invert_affine(const double (&m)[6], double* v) {
    double d = __dsub_rn(__dmul_rn(m[0], m[4]), __dmul_rn(m[1], m[3]));
    const bool regular = d != 0.0;
    d = regular ? __ddiv_rn(1.0, d) : 0.0;
    const double i00 = __dmul_rn(m[4], d), i11 = __dmul_rn(m[0], d);
    const double i01 = __dmul_rn(m[1], -d), i10 = __dmul_rn(m[3], -d);
    v[0] = i00, v[1] = i01, v[2] = __dsub_rn(__dmul_rn(-i00, m[2]), __dmul_rn(i01, m[5]));
    v[3] = i10, v[4] = i11, v[5] = __dsub_rn(__dmul_rn(-i10, m[2]), __dmul_rn(i11, m[5]));
    return regular;
}

__device__ __forceinline__ void store6(double* out, const double (&m)[6]) {
#pragma unroll
    for (int j = 0; j < 6; ++j) out[j] = m[j];
}

}  // namespace

// Image i's source-to-destination matrix and its inverse, from its six uniforms u[i, 0..5]
// in [0, 1) (row-major, n x 6): angle, scale, shear, x shift, y shift, flip. Each operation
// is rounded on its own, in the order of geometry.py's _affine_from_uniforms (its NumPy
// formula, the CPU path), in one launch. det = s^2 f is never 0.
__global__ void cupyprep_random_affine_matrices(
    const double* __restrict__ u, int n, double deg0, double deg_span, double sc0,
    double sc_span, double sh0, double sh_span, double rad, double tx_span, double ty_span,
    double flip_p, double cx, double cy, double* __restrict__ mats, double* __restrict__ inv) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const double* r = u + (cp::i64)i * 6;
        const double a = __dmul_rn(__dadd_rn(deg0, __dmul_rn(deg_span, r[0])), rad);
        const double s = __dadd_rn(sc0, __dmul_rn(sc_span, r[1]));
        const double k = tan(__dmul_rn(__dadd_rn(sh0, __dmul_rn(sh_span, r[2])), rad));
        const double tx = __dmul_rn(__dsub_rn(__dmul_rn(2.0, r[3]), 1.0), tx_span);
        const double ty = __dmul_rn(__dsub_rn(__dmul_rn(2.0, r[4]), 1.0), ty_span);
        const double f = r[5] < flip_p ? -1.0 : 1.0;
        const double c = cos(a), sn = sin(a);
        double m[6];
        m[0] = __dmul_rn(__dmul_rn(s, c), f);
        m[1] = __dmul_rn(s, __dadd_rn(__dmul_rn(c, k), sn));
        m[3] = __dmul_rn(__dmul_rn(-s, sn), f);
        m[4] = __dmul_rn(s, __dsub_rn(c, __dmul_rn(sn, k)));
        m[2] = __dsub_rn(__dadd_rn(cx, tx), __dadd_rn(__dmul_rn(m[0], cx), __dmul_rn(m[1], cy)));
        m[5] = __dsub_rn(__dadd_rn(cy, ty), __dadd_rn(__dmul_rn(m[3], cx), __dmul_rn(m[4], cy)));
        store6(mats + (cp::i64)i * 6, m);
        invert_affine(m, inv + (cp::i64)i * 6);
    }
}

// Umeyama's least-squares similarity from k point pairs per set (row-major (k, 2) float64
// each; set i starts at src + i * src_step, dst + i * dst_step, a step of 0 repeats one
// set): with centered points p, q, a = sum(p . q) / sum |p|^2, b = sum(p_x q_y - p_y q_x) /
// sum |p|^2, M = [[a, -b, tx], [b, a, ty]], the translation mapping src's centroid to
// dst's. Sums run in point order (NumPy's pairwise sums may differ in the last bits). A set
// whose src points all coincide (sum |p|^2 = 0) sets bit 0 of *flags; with inv given, the
// inverse goes there too (invert_affine), and a singular M (a = b = 0) sets bit 1.
__global__ void cupyprep_similarity(const double* __restrict__ src, cp::i64 src_step,
                                    const double* __restrict__ dst, cp::i64 dst_step, int n,
                                    int k, double* __restrict__ mats, double* __restrict__ inv,
                                    int* __restrict__ flags) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const double* s = src + (cp::i64)i * src_step;
        const double* d = dst + (cp::i64)i * dst_step;
        double sx = 0.0, sy = 0.0, dx = 0.0, dy = 0.0;
        for (int j = 0; j < k; ++j) {
            sx += s[2 * j];
            sy += s[2 * j + 1];
            dx += d[2 * j];
            dy += d[2 * j + 1];
        }
        sx /= k, sy /= k, dx /= k, dy /= k;
        double var = 0.0, dot = 0.0, cross = 0.0;
        for (int j = 0; j < k; ++j) {
            const double px = s[2 * j] - sx, py = s[2 * j + 1] - sy;
            const double qx = d[2 * j] - dx, qy = d[2 * j + 1] - dy;
            var += px * px + py * py;
            dot += px * qx + py * qy;
            cross += px * qy - py * qx;
        }
        int flag = var == 0.0 ? 1 : 0;
        const double a = dot / var, b = cross / var;
        const double m[6] = {a, -b, dx - (a * sx - b * sy), b, a, dy - (b * sx + a * sy)};
        store6(mats + (cp::i64)i * 6, m);
        if (inv && !invert_affine(m, inv + (cp::i64)i * 6)) flag |= 2;
        if (flag) atomicOr(flags, flag);
    }
}
