// Fused batch preprocessing: resize (cv2.resize semantics) + placement on a padded canvas
// (letterbox, crop) + channel order + (x * scale - mean) * (1 / std) + layout + dtype, one
// launch for a whole batch.
//
// cupyprep_preprocess_<interpolation><TIn, TOut, CN, DENSE, RAGGED, NHWC, XPT>
//
// Each image n is resized to (nh, nw) and placed with its top-left corner at
// (off_y, off_x) on the (H, W) output canvas (negative offsets crop); canvas pixels that
// the image does not cover take the pad value. A resized pixel is rounded to TIn before it
// is normalized, exactly as cv2.resize followed by a normalization gives it. `area` is
// INTER_AREA's fast regime (every image's scales integers; the host resizes other area
// factors first and then runs `nearest` at scale 1).
//
// DENSE: every image's pixels are contiguous (s_c = 1, s_x = CN), so addresses fold into
// constants; otherwise any element strides.
// RAGGED = false: one NHWC batch, image n at base + n * s_n, one geometry for all.
// RAGGED = true: a list, image n's source and geometry in records[n] and its plan in
// plans[4n ..] = {nh, nw, off_y, off_x}: up to cp::kImagesByValue of each by value
// (`small`, `small_plans`), or, where `table` is not NULL, N records followed by N plans
// there. The resize step 1 / (nh / h0) is worked out here in double, as the host does it.
// NHWC: the output's channels are interleaved (its layout "NHWC"; the strides d_* are
// honored either way, and only the form of the stores depends on it: store_normalized_px).
#include "sampling.cuh"

// BY_VALUE(type): how the records by value are declared (the kernel's own parameters,
// or references to them in the functions it calls)
#define CUPYPREP_GRID_CONSTANT(...) const __grid_constant__ __VA_ARGS__
#define CUPYPREP_REFERENCE(...) const __VA_ARGS__&
#define CUPYPREP_PREPROCESS_PARAMS(BY_VALUE)                                               \
    const TIn* __restrict__ base, const cp::RaggedImage* __restrict__ table,               \
        BY_VALUE(cp::ByValue<cp::RaggedImage, RAGGED ? cp::kImagesByValue : 1>) small,     \
        BY_VALUE(cp::ByValue<int, RAGGED ? cp::kImagesByValue * 4 : 1>) small_plans, cp::i64 s_n, \
        int h0, int w0, int nh, int nw, int off_y, int off_x, cp::i64 s_y, cp::i64 s_x,    \
        cp::i64 s_c, double scale_y, double scale_x, TOut* __restrict__ dst, int H, int W, \
        cp::i64 d_n, cp::i64 d_y, cp::i64 d_x, cp::i64 d_c, int swap_rb, float scale,      \
        float m0, float m1, float m2, float m3, float sd0, float sd1, float sd2, float sd3, \
        float p0, float p1, float p2, float p3, int N, int rows_per_block

#define CUPYPREP_PREPROCESS_ARGS                                                          \
    base, table, small, small_plans, s_n, h0, w0, nh, nw, off_y, off_x, s_y, s_x, s_c,     \
        scale_y, scale_x, dst, H, W, d_n, d_y, d_x, d_c, swap_rb, scale, m0, m1, m2, m3,   \
        sd0, sd1, sd2, sd3, p0, p1, p2, p3, N, rows_per_block

namespace {

// Image n's source (pointer, size, element strides), resize steps and placement on the
// canvas. A batch's come from the kernel parameters. A list's are worked out by one thread
// into shared memory and read from there where they are used: held in registers across
// the block's loops, like the parameters of a batch, they took 16 more registers than a
// batch's (80 against 64 for uint8 linear; 72 now, and a list of 32 frames around 1080p
// letterboxed runs 4% faster: docs/performance-history/02-ragged-batches.md).
struct Geometry {
    unsigned long long img;
    cp::i64 s_y, s_x, s_c;
    double ky, kx;  // the resize steps
    int ih, iw, rh, rw, oy, ox;  // source size, resized size, offset on the canvas
};

template <int RECORDS, int PLANS>
__device__ __forceinline__ Geometry list_geometry(const cp::RaggedImage* table,
                                                  const cp::ByValue<cp::RaggedImage, RECORDS>& small,
                                                  const cp::ByValue<int, PLANS>& small_plans,
                                                  int N, int n) {
    const cp::RaggedImage& r = table ? table[n] : small.v[n];
    const int* g = table ? reinterpret_cast<const int*>(table + N) + (cp::i64)n * 4
                         : small_plans.v + n * 4;
    Geometry t;
    t.img = r.ptr;
    t.ih = r.h; t.iw = r.w; t.s_y = r.s_y; t.s_x = r.s_x; t.s_c = r.s_c;
    t.rh = g[0]; t.rw = g[1]; t.oy = g[2]; t.ox = g[3];
    // OpenCV's step: 1 / (new / old) in double, not old / new
    t.ky = __ddiv_rn(1.0, __ddiv_rn((double)t.rh, (double)t.ih));
    t.kx = __ddiv_rn(1.0, __ddiv_rn((double)t.rw, (double)t.iw));
    return t;
}

// Rows whose y taps a block works out at a time, into shared memory.
constexpr int kStagedRows = 16;

// uint8 linear on dense images (the fast path): the image's word base, and `ok` where every
// byte offset within the image, counted from its `words`, fits in int32.
struct WordImage : cp::WordBase {
    bool ok;
};

template <int CN>
__device__ __forceinline__ WordImage word_image(const unsigned char* img, int ih, int iw,
                                                cp::i64 s_y) {
    return {cp::word_base(img), cp::byte_offsets_fit<CN>(ih, iw, s_y, 16)};
}

// Whether the words window_words reads for column tap s (the pixels s and s + 1) stay within
// the row: they reach max(8, 2 * CN + 3) bytes past the tap's first. Before it they reach
// back at most to the 32-bit word holding the row's first byte, which lies in the same
// allocation (allocations start on a word), so no bound is needed there.
template <int CN>
__device__ __forceinline__ bool word_column(int s, int iw) {
    constexpr int after = 2 * CN + 3 > 8 ? 2 * CN + 3 : 8;
    return s * CN + after <= iw * CN;
}

// The 2 * CN bytes of a column tap pair as window_bytes gives them, read byte by byte: the
// first pixel's CN bytes at p, the second's at p + CN where it weighs anything (wx's high
// half), else p again (a clamped tap at the right edge, whose bytes are multiplied by 0).
template <int CN>
__device__ __forceinline__ void bytes8(const unsigned char* p, unsigned wx, unsigned& lo,
                                       unsigned& hi) {
    const unsigned char* q = p + ((wx >> 16) ? CN : 0);
    unsigned b[8] = {};
#pragma unroll
    for (int k = 0; k < 2 * CN; ++k) b[k] = __ldg(k < CN ? p + k : q + (k - CN));
    lo = b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24);
    hi = b[4] | (b[5] << 8) | (b[6] << 16) | (b[7] << 24);
}

// One tap row of linear_blend's uint8 arithmetic for CN channels at once, given the pixel
// pair's bytes (window_bytes' lo, hi): each channel's pair (p0, p1) weighed by a two-way dot
// product with the column weights packed as iw0 | iw1 << 16 (S = p0 * iw0 + p1 * iw1),
// then (S >> 4) * b >> 16 as the high word of (S >> 4) * (b << 16), added to t.
template <int CN>
__device__ __forceinline__ void linear_u8_row(unsigned lo, unsigned hi, unsigned wx,
                                              unsigned b16, unsigned (&t)[CN]) {
#pragma unroll
    for (int c = 0; c < CN; ++c) {
        const unsigned pair = __byte_perm(lo, hi, (unsigned)c | ((unsigned)(CN + c) << 4));
        t[c] += __umulhi(__dp2a_lo(wx, pair, 0u) >> 4, b16);
    }
}

// A fast-path thread's PX pixels of one row (the y taps ty; column taps as preprocess_body
// keeps them): v[p][c] the resized value of channel c, as a float. Every word load of the
// row is issued (predicated, not branched around) before anything waits for one; the
// columns that read byte by byte (bytes8) then replace their windows, in a branch that
// only the warps holding such a column take.
template <int CN, int PX>
__device__ __forceinline__ void linear_u8_pixels(const WordImage& wi, const cp::Taps& ty,
                                                 const unsigned (&xoff)[PX],
                                                 const unsigned (&xw)[PX], unsigned by_byte,
                                                 float (&v)[PX][CN]) {
    const unsigned r[2] = {(unsigned)ty.off[0], (unsigned)ty.off[1]};
    const unsigned b[2] = {(unsigned)ty.iw[0] << 16, (unsigned)ty.iw[1] << 16};
    const int rows = b[1] ? 2 : 1;  // a second tap row weighing 0 adds exactly 0
    unsigned w[2][PX][3];
#pragma unroll
    for (int k = 0; k < 2; ++k)
#pragma unroll
        for (int p = 0; p < PX; ++p)
            cp::window_words<2 * CN>(wi.words, r[k] + xoff[p], k < rows && !(by_byte >> p & 1u),
                                     w[k][p]);
    unsigned lo[2][PX], hi[2][PX];
#pragma unroll
    for (int k = 0; k < 2; ++k)
#pragma unroll
        for (int p = 0; p < PX; ++p) cp::window_bytes(w[k][p], r[k] + xoff[p], lo[k][p], hi[k][p]);
    if (by_byte) {
        const unsigned char* bytes = reinterpret_cast<const unsigned char*>(wi.words);
#pragma unroll
        for (int k = 0; k < 2; ++k)
#pragma unroll
            for (int p = 0; p < PX; ++p)
                if (k < rows && (by_byte >> p & 1u))
                    bytes8<CN>(bytes + (int)(r[k] + xoff[p]), xw[p], lo[k][p], hi[k][p]);
    }
#pragma unroll
    for (int p = 0; p < PX; ++p) {
        unsigned t[CN] = {};
#pragma unroll
        for (int k = 0; k < 2; ++k)
            if (k < rows) linear_u8_row<CN>(lo[k][p], hi[k][p], xw[p], b[k], t);
#pragma unroll
        for (int c = 0; c < CN; ++c) {
            const unsigned u = min((t[c] + 2u) >> 2, 255u);
            v[p][c] = __fsub_rn(__uint_as_float(u | cp::kTwo23Bits), cp::kTwo23);  // float(u)
        }
    }
}

}  // namespace

// A canvas pixel the image does not cover takes the pad value (normalized as a pixel is).
template <int CN>
__device__ __forceinline__ void fill_pad(float (&v)[CN], const float (&pad)[4]) {
#pragma unroll
    for (int c = 0; c < CN; ++c) v[c] = pad[c];
}

// Grid: x across blocks and threads, XPT adjacent columns per thread; blockIdx.y a group
// of rows_per_block rows; blockIdx.z an image (loops cover sizes past the grid's limits).
// Blocks are 1-D. A block works out the y taps of its rows once, in shared memory (up to
// kStagedRows at a time); a thread keeps its columns, so their taps are computed once for
// all its rows.
//
// uint8 linear on dense images takes a fast path where all of a thread's columns and the
// row are inside the image and the image's byte offsets fit in int32: each tap row's
// 2 * CN bytes come as the aligned 32-bit words that cover them (window_words; columns near the
// right edge, where those words would reach past the row, byte by byte: bytes8), the
// fixed-point arithmetic runs on packed bytes (linear_u8_row), the bytes' float is
// 2^23 + v less 2^23 (no conversion instruction), and a row whose second tap weighs 0 (an
// exact factor, as 1080 to 360) is not read, since it adds exactly 0. Other threads,
// types and interpolations take linear_blend / sample_* element by element. Both give
// linear_blend's bits.
template <typename TIn, typename TOut, int CN, bool DENSE, bool RAGGED, bool NHWC, int INTERP,
          int XPT>
__device__ __forceinline__ void preprocess_body(CUPYPREP_PREPROCESS_PARAMS(CUPYPREP_REFERENCE)) {
    constexpr bool FAST = sizeof(TIn) == 1 && DENSE && INTERP == cp::INTERP_LINEAR;
    __shared__ cp::Taps staged[kStagedRows];
    const float mean[4] = {m0, m1, m2, m3};
    const float inv_std[4] = {sd0, sd1, sd2, sd3};  // 1 / std, rounded once on the host
    const float pad[4] = {p0, p1, p2, p3};
    __shared__ Geometry list_image;  // RAGGED: the block's image, written by thread 0
    for (int n = blockIdx.z; n < N; n += gridDim.z) {
        Geometry own;
        if constexpr (RAGGED) {
            __syncthreads();  // the block is done with the previous image's
            if (threadIdx.x == 0) list_image = list_geometry(table, small, small_plans, N, n);
            __syncthreads();
        } else {
            own = {(unsigned long long)(base + (cp::i64)n * s_n), s_y, s_x, s_c, scale_y,
                   scale_x, h0, w0, nh, nw, off_y, off_x};
        }
        // read where they are used (below: references), not held in registers
        const Geometry& G = RAGGED ? list_image : own;
        const TIn* img = reinterpret_cast<const TIn*>(G.img);
        const int &ih = G.ih, &iw = G.iw, &rh = G.rh, &rw = G.rw, &oy = G.oy, &ox = G.ox;
        const cp::i64& sy_ = G.s_y;
        const cp::i64 sx_ = DENSE ? (cp::i64)CN : G.s_x, sc_ = DENSE ? (cp::i64)1 : G.s_c;
        const double &ky = G.ky, &kx = G.kx;
        // cv2.resize's exact-factor-2 linear is area's cell mean: per pixel, not per tap
        const bool linear_2x = INTERP == cp::INTERP_LINEAR && ky == 2.0 && kx == 2.0;
        const bool taps = INTERP != cp::INTERP_AREA && !linear_2x;
        // area (the host launches it for integer factors only): the cell mean per pixel
        int isy = 1, isx = 1, whole_cells = 0;
        float inv_area = 1.f;
        if constexpr (INTERP == cp::INTERP_AREA) {
            isy = __double2int_rn(ky);  // OpenCV's saturate_cast<int>(scale)
            isx = __double2int_rn(kx);
            whole_cells = iw / isx;
            inv_area = __fdiv_rn(1.f, (float)(isx * isy));
        }
        WordImage wi{};
        if constexpr (FAST)
            wi = word_image<CN>(reinterpret_cast<const unsigned char*>(img), ih, iw, sy_);
        TOut* image_out = dst + (cp::i64)n * d_n;
        for (int group = blockIdx.y; group * rows_per_block < H; group += gridDim.y) {
            const int group_end = min(H, (group + 1) * rows_per_block);
            for (int y0 = group * rows_per_block; y0 < group_end; y0 += kStagedRows) {
                const int y_end = min(group_end, y0 + kStagedRows);
                if (taps) {
                    for (int r = threadIdx.x; r < y_end - y0; r += blockDim.x) {
                        const int ry = y0 + r - oy;
                        if (ry >= 0 && ry < rh)
                            staged[r] = cp::y_taps<TIn, CN, INTERP>(ry, ky, ih, sy_);
                    }
                    __syncthreads();
                }
                for (int x0 = (blockIdx.x * blockDim.x + threadIdx.x) * XPT; x0 < W;
                     x0 += gridDim.x * blockDim.x * XPT) {
                    const int count = min(XPT, W - x0);
                    cp::Taps tx[XPT];
                    bool col_inside[XPT];
                    bool fast = FAST && taps && wi.ok;
                    // the fast path's tap offsets (bytes from wi.words), packed weights, and
                    // which columns read their bytes one by one (bytes8: the right edge)
                    unsigned xoff[XPT], xw[XPT], by_byte = 0;
#pragma unroll
                    for (int j = 0; j < XPT; ++j) {
                        const int rx = x0 + j - ox;
                        col_inside[j] = j < count && rx >= 0 && rx < rw;
                        fast = fast && col_inside[j];
                        if (col_inside[j] && taps) {
                            tx[j] = cp::x_taps<TIn, CN, INTERP>(rx, kx, iw, sx_, rw);
                            if constexpr (FAST) {
                                // dense: off[0] is sx0 * CN (the byte offset itself, used
                                // as such, compiles to longer code under NVRTC 13.0 and 13.5)
                                const int sx0 = (int)(tx[j].off[0] / CN);
                                if (!word_column<CN>(sx0, iw)) by_byte |= 1u << j;
                                xoff[j] = wi.mis + (unsigned)(sx0 * CN);
                                xw[j] = (unsigned)tx[j].iw[0] | ((unsigned)tx[j].iw[1] << 16);
                            }
                        }
                    }
                    TOut* q = image_out + (cp::i64)y0 * d_y + (cp::i64)x0 * d_x;
                    if (FAST && fast) {
                        // a loop of its own, so the other path's column taps are not kept
                        for (int y = y0; y < y_end; ++y, q += d_y) {
                            float v[XPT][CN];
                            const int ry = y - oy;
                            if (ry >= 0 && ry < rh) {
                                linear_u8_pixels<CN, XPT>(wi, staged[y - y0], xoff, xw, by_byte, v);
                            } else {
#pragma unroll
                                for (int j = 0; j < XPT; ++j) fill_pad<CN>(v[j], pad);
                            }
                            cp::store_normalized_px<TOut, CN, XPT, NHWC>(
                                q, XPT, d_x, d_c, v, swap_rb, scale, mean, inv_std);
                        }
                        continue;
                    }
                    for (int y = y0; y < y_end; ++y, q += d_y) {
                        const int ry = y - oy;
                        const bool row_inside = ry >= 0 && ry < rh;
                        float v[XPT][CN];
#pragma unroll
                        for (int j = 0; j < XPT; ++j) {
                            if (row_inside && col_inside[j]) {
                                TIn t[CN];
                                if constexpr (INTERP == cp::INTERP_AREA)
                                    cp::sample_area_fast<TIn, CN>(img, sy_, sx_, sc_, ih, iw, ry,
                                                                  x0 + j - ox, isy, isx,
                                                                  whole_cells, inv_area, t);
                                else if (linear_2x)
                                    cp::sample_linear_2x<TIn, CN>(img, sy_, sx_, sc_, ih, iw, ry,
                                                                  x0 + j - ox, t);
                                else
                                    cp::blend<TIn, CN, INTERP>(img, sc_, tx[j], staged[y - y0], t);
#pragma unroll
                                for (int c = 0; c < CN; ++c) v[j][c] = cp::to_float(t[c]);
                            } else {
                                fill_pad<CN>(v[j], pad);
                            }
                        }
                        cp::store_normalized_px<TOut, CN, XPT, NHWC>(
                            q, count, d_x, d_c, v, swap_rb, scale, mean, inv_std);
                    }
                }
                if (taps) __syncthreads();  // before the next rows' taps replace these
            }
        }
    }
}

#define CUPYPREP_PREPROCESS_KERNEL(NAME, INTERP)                                           \
    template <typename TIn, typename TOut, int CN, bool DENSE, bool RAGGED, bool NHWC,    \
              int XPT>                                                                    \
    __global__ void cupyprep_preprocess_##NAME(                                           \
        CUPYPREP_PREPROCESS_PARAMS(CUPYPREP_GRID_CONSTANT)) {                             \
        preprocess_body<TIn, TOut, CN, DENSE, RAGGED, NHWC, INTERP, XPT>(                 \
            CUPYPREP_PREPROCESS_ARGS);                                                    \
    }

CUPYPREP_PREPROCESS_KERNEL(nearest, cp::INTERP_NEAREST)
CUPYPREP_PREPROCESS_KERNEL(linear, cp::INTERP_LINEAR)
CUPYPREP_PREPROCESS_KERNEL(cubic, cp::INTERP_CUBIC)
CUPYPREP_PREPROCESS_KERNEL(area, cp::INTERP_AREA)
