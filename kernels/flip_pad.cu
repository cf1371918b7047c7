// Index-mapping copies: flip (cv2.flip), rotate90 (np.rot90, cv2.rotate) and pad
// (cv2.copyMakeBorder).
//
// cupyprep_copy_border<T, CN> is the general kernel, for any strides: output pixel (y, x)
// of a plane copies pixel
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
//
// Where a view's pixels are adjacent along its rows or its columns, and the output's along
// its rows, three byte-moving kernels do the same copies at close to the memory's rate
// (the host picks one, cupyprep/flip_pad.py _plan): cupyprep_copy_rows (rows in order,
// with borders: pad, vertical flips), cupyprep_mirror_rows<PX> (rows mirrored: horizontal
// flips, half turns) and cupyprep_turn_tiles<PX> (quarter turns through shared memory).
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

// --- byte-level row and tile copies ------------------------------------------------------
// The kernels below move bytes, not elements: a pixel is `px` bytes (its channels
// adjacent), rows of the source and the output hold their pixels side by side, and every
// address and stride is in bytes. The host sends here what fits that shape (a general
// kernel above takes the rest). Addresses are whatever the arrays give: each kernel finds
// its rows' alignment itself, moves the aligned middle of a row in 16-byte vectors and its
// ragged ends byte by byte, and never reads outside a source row. Offsets inside one row
// (or tile) are 32-bit; a row's start is 64-bit.
namespace fp {

typedef unsigned long long u64;
typedef unsigned char u8;

// 16 * NV bytes at s (any address) as 4 * NV words in address order, from the aligned
// 16-byte vectors covering them: NV of them where s is aligned, NV + 1 otherwise, starting
// at s & ~15 (the caller has checked that those lie inside the row).
template <int NV>
__device__ __forceinline__ void load_vectors(const u8* s, unsigned (&v)[4 * NV]) {
    const u64 a = (u64)s;
    const uint4* p = reinterpret_cast<const uint4*>(a & ~15ull);
    const unsigned k = (unsigned)(a & 15u);
    unsigned w[4 * NV + 4];
#pragma unroll
    for (int j = 0; j < NV; ++j) {
        const uint4 u = __ldg(p + j);
        w[4 * j] = u.x, w[4 * j + 1] = u.y, w[4 * j + 2] = u.z, w[4 * j + 3] = u.w;
    }
    if (k == 0) {
#pragma unroll
        for (int i = 0; i < 4 * NV; ++i) v[i] = w[i];
        return;
    }
    const uint4 u = __ldg(p + NV);
    w[4 * NV] = u.x, w[4 * NV + 1] = u.y, w[4 * NV + 2] = u.z, w[4 * NV + 3] = u.w;
    // whole words by selects (the offset q is the same for a row's every vector: no
    // divergence), the bytes left by a funnel shift
    const unsigned q = k >> 2, shift = (k & 3u) * 8;
#pragma unroll
    for (int i = 0; i < 4 * NV; ++i) {
        const unsigned lo = q == 0 ? w[i] : q == 1 ? w[i + 1] : q == 2 ? w[i + 2] : w[i + 3];
        const unsigned hi = q == 0 ? w[i + 1] : q == 1 ? w[i + 2] : q == 2 ? w[i + 3] : w[i + 4];
        v[i] = __funnelshift_r(lo, hi, shift);
    }
}

// Whether load_vectors<NV>(s) stays inside the bytes [lo, hi).
template <int NV>
__device__ __forceinline__ bool vectors_inside(const u8* s, const u8* lo, const u8* hi) {
    const u64 a = (u64)s, first = a & ~15ull;
    return first >= (u64)lo && first + 16ull * (NV + ((a & 15u) != 0)) <= (u64)hi;
}

template <int NV>
__device__ __forceinline__ void store_vectors(u8* d, const unsigned (&v)[4 * NV]) {
#pragma unroll
    for (int j = 0; j < NV; ++j)
        reinterpret_cast<uint4*>(d)[j] = make_uint4(v[4 * j], v[4 * j + 1], v[4 * j + 2], v[4 * j + 3]);
}

// Byte e (0..15) of the 16-byte fill pattern.
__device__ __forceinline__ unsigned pattern_byte(uint4 f, int e) {
    const unsigned w = e < 8 ? (e < 4 ? f.x : f.y) : (e < 12 ? f.z : f.w);
    return (w >> (8 * (e & 3))) & 0xffu;
}

// The source pixel of output pixel x of a padded row (left border pixels, then the row):
// border_index, out of line, since the unrolled byte loops below call it once a byte.
__device__ __noinline__ int border_source(int x, int left, int sw, int border) {
    return cp::border_index(x - left, sw, border);
}

// The bytes of a padded row: each output pixel's source pixel (border_source; -1 for the
// constant border or a constant row, `row` null) and its bytes, or the fill pattern's.
struct PaddedRow {
    const u8* row;  // the source row, or null where the whole row is the constant border
    int px, sw, left, border;
    uint4 fill;

    __device__ __forceinline__ int source(int x) const {
        return row ? border_source(x, left, sw, border) : -1;
    }
    __device__ __forceinline__ unsigned byte(int sx, int e) const {
        return sx < 0 ? pattern_byte(fill, e & 15) : row[sx * px + e];
    }
    // the 16 bytes from row offset o: where each comes from first (the source byte, or
    // -1 - the fill pattern's byte; one division for them all), then their loads at once
    __device__ __forceinline__ void bytes16(int o, unsigned* v) const {
        int x = o / px, e = o - x * px, sx = source(x);
        int from[16];
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            from[j] = sx < 0 ? -1 - (e & 15) : sx * px + e;
            if (++e == px) e = 0, sx = source(++x);
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            unsigned word = 0;
#pragma unroll
            for (int b = 0; b < 4; ++b) {
                const int f = from[4 * i + b];
                word |= (f < 0 ? pattern_byte(fill, -1 - f) : row[f]) << (8 * b);
            }
            v[i] = word;
        }
    }
};

}  // namespace fp

// Rows with borders: output row y of a plane is the source row border_index(y - top) (or
// the constant border) with `left` pixels of border before it and the rest after, as
// cupyprep_copy_border makes it; no flip. Pad, a vertical flip (a negative s_y) and a copy.
// The fill pattern f0..f3 is the constant border's pixel as stored, repeated to 16 bytes.
// Each thread makes a 32-byte piece of a row, from a 16-byte boundary; grid: x along the
// row, a row per blockIdx.y, a plane per blockIdx.z, loops past the grid's limits.
__global__ void cupyprep_copy_rows(const void* __restrict__ src, void* __restrict__ dst,
                                   int groups, int sh, int sw, int dh, int dw, int px,
                                   cp::i64 s_off, cp::i64 s_n, cp::i64 s_g, cp::i64 s_y,
                                   cp::i64 d_n, cp::i64 d_g, cp::i64 d_y, int top, int left,
                                   int border, unsigned f0, unsigned f1, unsigned f2,
                                   unsigned f3, int planes) {
    constexpr int NV = 2, PIECE = 16 * NV;  // 32 bytes a thread: two vectors in flight
    const int row_bytes = dw * px, left_bytes = left * px, src_bytes = sw * px;
    for (int plane = blockIdx.z; plane < planes; plane += gridDim.z) {
        const int n = plane / groups, g = plane - n * groups;
        const fp::u8* img = static_cast<const fp::u8*>(src) + s_off + n * s_n + g * s_g;
        fp::u8* out = static_cast<fp::u8*>(dst) + n * d_n + g * d_g;
        for (int y = blockIdx.y; y < dh; y += gridDim.y) {
            const int sy = cp::border_index(y - top, sh, border);
            const fp::PaddedRow pr{sy < 0 ? nullptr : img + sy * s_y, px, sw, left, border,
                                   make_uint4(f0, f1, f2, f3)};
            fp::u8* q = out + y * d_y;
            // the row's bytes: a ragged head up to the first 16-byte boundary, whole pieces,
            // a ragged tail
            const int head = min((int)((16u - (unsigned)((fp::u64)q & 15u)) & 15u), row_bytes);
            const int pieces = (row_bytes - head) / PIECE, tail = row_bytes - head - PIECE * pieces;
            for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < pieces;
                 i += gridDim.x * blockDim.x) {
                const int o = head + PIECE * i;
                unsigned v[4 * NV];
                bool copied = false;  // a piece of the source row, its vectors inside the row
                if (pr.row && o >= left_bytes && o + PIECE <= left_bytes + src_bytes) {
                    const fp::u8* s = pr.row + (o - left_bytes);
                    copied = fp::vectors_inside<NV>(s, pr.row, pr.row + src_bytes);
                    if (copied) fp::load_vectors<NV>(s, v);
                }
                if (!copied) {
#pragma unroll
                    for (int h = 0; h < NV; ++h) pr.bytes16(o + 16 * h, v + 4 * h);
                }
                fp::store_vectors<NV>(q + o, v);
            }
            if (blockIdx.x == 0) {
                for (int b = threadIdx.x; b < head + tail; b += blockDim.x) {
                    const int o = b < head ? b : b + PIECE * pieces;
                    const int x = o / px;
                    q[o] = (fp::u8)pr.byte(pr.source(x), o - x * px);
                }
            }
        }
    }
}

namespace fp {
__host__ __device__ constexpr int gcd(int a, int b) { return b == 0 ? a : gcd(b, a % b); }
}  // namespace fp

// Mirrored rows: output pixel x of a row is source pixel w - 1 - x (a horizontal flip; a
// half turn with a negative s_y). `src` + s_off is the source row's lowest pixel. A thread
// makes a run of whole pixels filling 32 or 48 aligned bytes (lcm(PX, 16), at least 32):
// it loads the mirrored run as 16-byte vectors, reverses the pixels' order in registers
// and stores it.
template <int PX>
__global__ void cupyprep_mirror_rows(const void* __restrict__ src, void* __restrict__ dst,
                                     int groups, int h, int w, cp::i64 s_off, cp::i64 s_n,
                                     cp::i64 s_g, cp::i64 s_y, cp::i64 d_n, cp::i64 d_g,
                                     cp::i64 d_y, int planes) {
    // a run: the fewest whole pixels that fill 16-byte vectors, and at least two of those
    constexpr int LCM = PX / fp::gcd(PX, 16) * 16, RUN = LCM == 16 ? 32 : LCM;
    constexpr int NV = RUN / 16, G = RUN / PX;
    const int row_bytes = w * PX;
    for (int plane = blockIdx.z; plane < planes; plane += gridDim.z) {
        const int n = plane / groups, g = plane - n * groups;
        const fp::u8* img = static_cast<const fp::u8*>(src) + s_off + n * s_n + g * s_g;
        fp::u8* out = static_cast<fp::u8*>(dst) + n * d_n + g * d_g;
        for (int y = blockIdx.y; y < h; y += gridDim.y) {
            const fp::u8* row = img + y * s_y;
            fp::u8* q = out + y * d_y;
            // the first 16-byte boundary that is also a pixel boundary (none where the row
            // starts inside a pixel's alignment: then every byte takes the ragged path)
            const int to16 = (int)((16u - (unsigned)((fp::u64)q & 15u)) & 15u);
            int head = row_bytes;
#pragma unroll
            for (int m = LCM / 16 - 1; m >= 0; --m)
                if ((to16 + 16 * m) % PX == 0) head = to16 + 16 * m;
            head = min(head, row_bytes);
            const int runs = (row_bytes - head) / RUN, tail = row_bytes - head - RUN * runs;
            for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < runs;
                 i += gridDim.x * blockDim.x) {
                const int o = head + RUN * i, x0 = o / PX;
                const fp::u8* s = row + (w - x0 - G) * PX;  // the run's source, lowest byte first
                unsigned v[4 * NV], r[4 * NV];
                if (fp::vectors_inside<NV>(s, row, row + row_bytes)) {
                    fp::load_vectors<NV>(s, v);
                } else {
#pragma unroll
                    for (int k = 0; k < 4 * NV; ++k)
                        v[k] = s[4 * k] | s[4 * k + 1] << 8 | s[4 * k + 2] << 16 |
                               (unsigned)s[4 * k + 3] << 24;
                }
                // output byte j is byte j % PX of the run's pixel G - 1 - j / PX
#pragma unroll
                for (int k = 0; k < 4 * NV; ++k) {
                    unsigned word = 0;
#pragma unroll
                    for (int b = 0; b < 4; ++b) {
                        const int j = 4 * k + b, from = (G - 1 - j / PX) * PX + j % PX;
                        word |= ((v[from >> 2] >> (8 * (from & 3))) & 0xffu) << (8 * b);
                    }
                    r[k] = word;
                }
                fp::store_vectors<NV>(q + o, r);
            }
            if (blockIdx.x == 0) {
                for (int b = threadIdx.x; b < head + tail; b += blockDim.x) {
                    const int o = b < head ? b : b + RUN * runs;
                    const int x = o / PX;
                    q[o] = row[(w - 1 - x) * PX + (o - x * PX)];
                }
            }
        }
    }
}

// Quarter turns (any view whose pixels are adjacent down its columns): output pixel (i, j)
// of a plane is view pixel (i, j), at src + s_off + i * dir * PX + j * s_j bytes (dir = +1
// or -1). A block moves a tile of S x S pixels through shared memory: it reads the
// tile's view columns (each a run of source bytes) in coalesced words, then writes the
// output rows in coalesced words, gathering each word's pixels from the tile. Tiles whose
// runs or output rows are not word-aligned move byte by byte.
namespace fp {
constexpr int kTurnThreadsX = 32, kTurnThreadsY = 8;  // a cupyprep_turn_tiles block
constexpr int kTurnTileSmallPixels = 64, kTurnTileLargePixels = 32;  // pixels a tile's side
template <int PX> struct Tile {
    // runs of >= 64 bytes
    static constexpr int kSize = PX <= 3 ? kTurnTileSmallPixels : kTurnTileLargePixels;
    // a column's bytes in shared memory, padded so that a warp's gathers spread over banks
    static constexpr int kPitch = kSize * PX + (PX % 4 == 0 ? PX : 4);
    static constexpr int kElem = PX % 4 == 0 ? 4 : (PX % 2 == 0 ? 2 : 1);  // gather unit
};

// Output word at byte o of an output row: its pixels from tile columns o / PX.., each at
// byte `at` of its column (the output row's pixel).
template <int PX>
__device__ __forceinline__ unsigned gather_word(const u8* tile, int at, int o) {
    constexpr int E = Tile<PX>::kElem;
    unsigned v = 0;
#pragma unroll
    for (int t = 0; t < 4 / E; ++t) {
        const int b = o + E * t, c = b / PX;
        const u8* p = tile + c * Tile<PX>::kPitch + at + (b - c * PX);
        if (E == 4)
            v = *reinterpret_cast<const unsigned*>(p);
        else if (E == 2)
            v |= (unsigned)*reinterpret_cast<const unsigned short*>(p) << (16 * t);
        else
            v |= (unsigned)*p << (8 * t);
    }
    return v;
}
}  // namespace fp

template <int PX>
__global__ void __launch_bounds__(fp::kTurnThreadsX * fp::kTurnThreadsY)
cupyprep_turn_tiles(const void* __restrict__ src, void* __restrict__ dst, int groups, int h,
                    int w, cp::i64 s_off, cp::i64 s_n, cp::i64 s_g, int dir, cp::i64 s_j,
                    cp::i64 d_n, cp::i64 d_g, cp::i64 d_y, int planes) {
    typedef fp::Tile<PX> T;
    constexpr int S = T::kSize, PITCH = T::kPitch, TX = fp::kTurnThreadsX, TY = fp::kTurnThreadsY;
    constexpr int WORDS = (S * PX / 4 + TX - 1) / TX;  // a row of words, in rounds of TX threads
    __shared__ __align__(16) fp::u8 tile[S * PITCH];
    const int tx = threadIdx.x, ty = threadIdx.y;  // a TX x TY block
    for (int plane = blockIdx.z; plane < planes; plane += gridDim.z) {
        const int n = plane / groups, g = plane - n * groups;
        const fp::u8* img = static_cast<const fp::u8*>(src) + s_off + n * s_n + g * s_g;
        fp::u8* out = static_cast<fp::u8*>(dst) + n * d_n + g * d_g;
        for (int i0 = blockIdx.y * S; i0 < h; i0 += gridDim.y * S) {
            for (int j0 = blockIdx.x * S; j0 < w; j0 += gridDim.x * S) {
                const int ni = min(S, h - i0), nj = min(S, w - j0);
                const int run = ni * PX, row = nj * PX;  // bytes of a tile column, of an output row
                // column c of the tile: `run` bytes from `first` + c * s_j, view row i0 + r at
                // byte `at(r)` of it
                const fp::u8* first = img + (cp::i64)(dir > 0 ? i0 : i0 + ni - 1) * dir * PX +
                                      j0 * s_j;
                fp::u8* q = out + i0 * d_y + j0 * PX;
                const bool words = (((fp::u64)first | (fp::u64)s_j | (fp::u64)q | (fp::u64)d_y |
                                     (unsigned)run | (unsigned)row) & 3u) == 0;
                if (words) {
                    // every load of the tile first (up to 16 words a thread), then the stores
                    unsigned v[S / TY][WORDS];
#pragma unroll
                    for (int a = 0; a < S / TY; ++a) {
                        const int c = ty + TY * a;
                        const unsigned* p = reinterpret_cast<const unsigned*>(first + c * s_j);
#pragma unroll
                        for (int b = 0; b < WORDS; ++b) {
                            const int k = tx + TX * b;
                            if (c < nj && k < run / 4) v[a][b] = __ldg(p + k);
                        }
                    }
#pragma unroll
                    for (int a = 0; a < S / TY; ++a) {
                        const int c = ty + TY * a;
                        unsigned* t = reinterpret_cast<unsigned*>(tile + c * PITCH);
#pragma unroll
                        for (int b = 0; b < WORDS; ++b) {
                            const int k = tx + TX * b;
                            if (c < nj && k < run / 4) t[k] = v[a][b];
                        }
                    }
                } else {
                    // a column at a time, 8 loads a thread at once
                    for (int c = ty; c < nj; c += TY) {
                        const fp::u8* p = first + c * s_j;
                        for (int k0 = tx; k0 < run; k0 += 8 * TX) {
                            fp::u8 v[8];
#pragma unroll
                            for (int b = 0; b < 8; ++b)
                                if (k0 + TX * b < run) v[b] = p[k0 + TX * b];
#pragma unroll
                            for (int b = 0; b < 8; ++b)
                                if (k0 + TX * b < run) tile[c * PITCH + k0 + TX * b] = v[b];
                        }
                    }
                }
                __syncthreads();
                for (int r = ty; r < ni; r += TY) {
                    const int at = (dir > 0 ? r : ni - 1 - r) * PX;
                    fp::u8* o = q + r * d_y;
                    if (words) {
#pragma unroll
                        for (int b = 0; b < WORDS; ++b) {
                            const int k = tx + TX * b;
                            if (k < row / 4)
                                reinterpret_cast<unsigned*>(o)[k] = fp::gather_word<PX>(tile, at, 4 * k);
                        }
                    } else {
                        for (int k = tx; k < row; k += TX) {
                            const int c = k / PX;
                            o[k] = tile[c * PITCH + at + (k - c * PX)];
                        }
                    }
                }
                __syncthreads();
            }
        }
    }
}
