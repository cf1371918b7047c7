// Affine and perspective warps with cv2.warpAffine / cv2.warpPerspective semantics:
// cupyprep_warp_<affine|perspective>_<interpolation><T, CN>. Their parameters, OpenCV's
// float warp coordinates (nearest, linear, cubic) and the border are described in
// warp_common.cuh; the uint8 linear affine warp that stages a tile's source box in shared
// memory is warp_staged.cu.
//
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
// each interior tap pair as the aligned 32-bit words that cover its 2 * CN bytes
// (warp_dense_u8.cuh); the other types read 8- and 16-byte pixels as one word where the
// image's start and row stride are aligned to it, a linear tap pair of 2-byte elements as
// the 32-bit words that cover it and one of float32 (3 channels) as aligned 8-byte words.
// In a dense kernel, pixels that need border logic wait until the thread's group is stored
// and are then made one at a time (a small unrolled loop for the instruction cache). Only
// the memory access changes: every pixel's arithmetic is the same in every variant
// (nearest copies elements, converting only 2-byte ones to float and back).
//
// OpenCV has two implementations, and picks by channel count and interpolation; each is
// reproduced step by step, as a family of kernels here:
//
// "nearest", "linear": OpenCV's float warp kernels (warp_common.cuh).
//
// "cubic": the float coordinates of nearest and linear, the SIMD body's formula for every x
// (OpenCV's cubic warp has no scalar tail; body_end is not read), except that a perspective
// divides unrounded X and W (cubic_coords); Keys' weights (A = -0.75) at the exact fraction.
//
// "nearest_fixed", "linear_fixed" (OpenCV's older remap path, which it keeps for 2
// channels): coordinates in double, quantized to 1/32 pixel
// (affine: AB_BITS = 10 fixed point per row plus a rounded per-column term; perspective:
// 32 / w), then remap with initInterTab2D's 32x32 weight tables (`itab` int16 weights
// summing to 1 << 15 for uint8, `ftab` float32 otherwise), summed in OpenCV's order.

// warp_dense_u8.cuh brings warp_common.cuh, sampling.cuh and common.cuh
#include "warp_dense_u8.cuh"

namespace {

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

// Cubic's source coordinates. Affine: the float warp coordinates of nearest / linear (SIMD
// body). Perspective: OpenCV 5's cubic warp does not round X and W to float32 before the
// division: from the float32 matrix and float32 row terms r = y * M1 + M2 (as nearest /
// linear), X = M0 * x + r and W alike are exact enough, and X / W is rounded once to
// float32 (here in double: an fma and a division). Rounding X and W first moved the
// coordinate by up to 3 ulps, 2e-4 pixel near x = 1000: 0.02 on an edge of 255 per pixel.
template <bool PERSPECTIVE>
__device__ __forceinline__ void cubic_coords(const float (&m)[9], int x, int y, float& sx,
                                             float& sy) {
    if constexpr (!PERSPECTIVE) {
        float_coords<false>(m, x, y, true, sx, sy);
    } else {
        const float fy = (float)y;
        const double dx = (double)x;
        const double X = __fma_rn((double)m[0], dx, (double)__fadd_rn(__fmul_rn(fy, m[1]), m[2]));
        const double Y = __fma_rn((double)m[3], dx, (double)__fadd_rn(__fmul_rn(fy, m[4]), m[5]));
        const double W = __fma_rn((double)m[6], dx, (double)__fadd_rn(__fmul_rn(fy, m[7]), m[8]));
        sx = __double2float_rn(__ddiv_rn(X, W));
        sy = __double2float_rn(__ddiv_rn(Y, W));
    }
}

// Cubic: OpenCV 5 samples Keys' kernel at the unquantized float32 coordinate
// (cubic_coords); taps outside follow the border, and with a
// constant border a pixel whose 4x4 window lies wholly outside is the border value. The
// products are summed as cubic_sum does (OpenCV's own summation order is not reproduced:
// results agree within float32 rounding, 1 for integer types). A window wholly inside the
// image reads its rows directly; others go through cubic_border_sum.
template <typename T, int CN, bool PERSPECTIVE, bool DENSE>
__device__ __forceinline__ void warp_cubic(const Item<T>& it, int x, int y, int border,
                                           const float (&bval)[4], const T (&border_fill)[CN],
                                           int body_end, T (&v)[CN]) {
    float sx, sy;
    cubic_coords<PERSPECTIVE>(it.mf, x, y, sx, sy);
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
