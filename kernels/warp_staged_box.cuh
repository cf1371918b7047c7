// The staged uint8 warp's (warp_staged.cu) tiles: the fields a block shares about them,
// each tile's plan and source box, and the copy of that box into shared memory.
//
// The box: every pixel's float coordinate (either of OpenCV's formulas, body or tail) lies
// within 3 units in the last place of |m0 x| + |m1 y| + |m2| (three roundings) of the exact
// m0 x + m1 y + m2 of the float matrix, which is affine, so its extremes over the tile are
// at the corners; staged_box takes those, widened by a margin of that sum, floors them, and
// adds the second tap's column and row. Its columns start on a multiple of kStagedGroup
// (the copy's unit). Coordinates inside a box that meets the image are below 2^21 in size,
// where s + 1.5 * 2^23 rounded down is exactly 1.5 * 2^23 + floor(s), so the floor and the
// tap's word come from that sum's bit pattern, as in the dense fast path.
#pragma once
#include "warp_dense_u8.cuh"

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
// The most tiles a block makes in turn (WarpSpec.staged_most_tiles)
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

}  // namespace
