// Dense uint8 warps, 1, 3 or 4 channels: the interior pixels' fast path of warp.cu's dense
// nearest and linear kernels, whose linear pieces warp_staged.cu reuses for the pixels it
// does not stage (staged_direct) and for its blend (blend_biased).
//
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
// are outside is the border value there too; every other pixel is left to warp.cu's
// dense_rest, after the group is stored (linear_edge, or warp_nearest / warp_linear).
#pragma once
#include "warp_common.cuh"

namespace {

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
// the first and last) made the whole kernel slower (docs/performance-history/04-warp-dense.md). uint8 border
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

}  // namespace
