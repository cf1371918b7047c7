// Device code shared by the warp kernels with cv2.warpAffine / cv2.warpPerspective
// semantics, warp.cu's and warp_staged.cu's: their parameters, each output image's source
// and matrix, OpenCV's float warp coordinates, taps through the border, word reads of dense
// sources, and the float kernels' nearest and linear pixels.
//
// Every warp kernel reads `mats`: per output image, the matrix that maps destination pixels
// to source pixels (the host inverts src->dst matrices in double, as OpenCV does), 6 or 9
// doubles, `mat_step` apart (0: one matrix for the whole batch); where `mats` is NULL, the
// one matrix `mat_value` passed by value (a host matrix: nothing to upload, and a CUDA
// graph that captures the launch keeps its values). Output image i samples
// source image `src_index[i]` (NULL: image i). Sources are one strided batch (`src`, one
// geometry) or, where `src` is NULL, a ragged list: up to cp::kImagesByValue image records
// by value (`src_list`), or a longer list's records in `src_table`.
//
// OpenCV's float warp kernels ("nearest", "linear": 1, 3 or 4 channels):
//   M is rounded to float32. Source coordinates are float32: within its SIMD body (x below
//   `body_end`, the destination width rounded down to OpenCV's 16-pixel vector step on AVX2)
//   sx = fma(M0, x, float(y*M1 + M2)) (the row term unfused); in its scalar tail the
//   compiler contracts x*M0 + y*M1 + M2 to fma(x, M0, y*M1) + M2. Perspective divides by
//   w computed the same way. Linear: ix = floor(sx), a = sx - ix, then
//   v0 = fma(a, p01 - p00, p00), v1 = fma(a, p11 - p10, p10), v = fma(b, v1 - v0, v0),
//   rounded half to even and saturated. Nearest: ix = rint(sx) (half to even).
//
// Border (runtime `border`, reached only by taps outside the image): 0 constant,
// 1 replicate, 2 reflect, 3 reflect101, 4 wrap; constant taps take bval[c].
#pragma once
// sampling.cuh brings common.cuh and the cubic weights resize uses
#include "sampling.cuh"

namespace {

// common.cuh's border modes and border_index, under the names the warp sources use
enum { CONSTANT = cp::BORDER_CONSTANT, REPLICATE = cp::BORDER_REPLICATE,
       REFLECT = cp::BORDER_REFLECT, REFLECT101 = cp::BORDER_REFLECT101, WRAP = cp::BORDER_WRAP };
using cp::border_index;

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

}  // namespace
