// The staged uint8 linear affine warp (constant border): each output tile made from its
// source box, copied into shared memory once.
//
// cupyprep_warp_affine_linear_staged<T = uint8, CN, LIST, BLOCKS> (CN 3 or 4; dense sources
// whose first byte and row stride are multiples of 4, in every source of a list; dense
// outputs). A block of kStagedThreads makes a kStagedTile-square output tile. Its taps lie
// in a box of source pixels bounded from the tile's corners (warp_staged_box.cuh); the
// block copies that box into shared memory once, a pixel a 32-bit word (its CN bytes, then
// garbage for 3 channels), with the border value in every word outside the image, and then
// makes each output pixel from four words there with warp_linear's arithmetic
// (blend_biased), whatever its taps: inside, across the border or wholly outside, all the
// same instructions. A tile whose box lies wholly outside the image is the border value;
// one whose box does not fit the buffer (a zoom-out) is made as four tiles of half the
// side, and a half tile that does not fit either (or copies far more than it reads, or
// whose coordinates are not finite, or whose image's byte offsets pass 32 bits) pixel by
// pixel as the dense kernel makes them (staged_direct). The tiles in order, image by image
// and row by row, are the launch's work: its first `grouped` blocks make `group`
// consecutive tiles each, one after another, and the blocks after them one tile each (the
// host's _warping.staged_launch; a grid smaller than that loops over more). Threads 0 to
// group - 1 work out what their tiles' threads share (StagedShared) side by side before the
// plan's barrier, so a block's later tiles wait for no plan (a block's tiles are neighbours
// in a row of tiles); the single tiles at the end keep the launch's last blocks short.
//
// The fields a block shares about its tiles, their plans and the copy of their boxes:
// warp_staged_box.cuh.
#include "warp_staged_box.cuh"

namespace {

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
    const int fields = (cn == 3 ? (int)sizeof(StagedShared<3>) : (int)sizeof(StagedShared<4>));
    const int fit = (49152 - staged_out_bytes(cn) - fields) / (4 * kStagedPitch);
    return (most < fit ? most : fit) * kStagedPitch;
}
// A half tile is staged only where its box copies at most this many words a pixel (a
// zoom-out copies more than it reads): staged_direct makes it otherwise.
constexpr int kStagedRatio = 3;
constexpr unsigned kFloorBits = kRoundBits;  // 1.5 * 2^23, kRound
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
            staged_tile<CN>(k, b, ox, oy);
        }
        // the fields are read until here (a barrier right after reading them, before the
        // copy, made W5 1.4% slower)
        __syncthreads();
    }
}
