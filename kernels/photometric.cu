// Photometric augmentation with per-image parameters drawn on the device: YOLO's HSV gain
// (hsv_gain) and torchvision's ColorJitter (color_jitter).
#include "color.cuh"

// --- hsv_gain ------------------------------------------------------------------------------
// Ultralytics' augment_hsv: image i's gains r_c = (u[i, c] * 2 - 1) * gain_c + 1 (u: float64
// uniforms in [0, 1), each step rounded as NumPy's, written to gains (n, 3)) make three tables
//   hue[x] = (x * r0) mod 180, sat[x] = clip(x * r1, 0, 255), val[x] = clip(x * r2, 0, 255),
// each truncated to uint8, in double as NumPy computes them (mod: fmod, plus 180 where that
// is negative, NumPy's floor modulo). luts: (n, 3, 256) uint8.
__global__ void cupyprep_hsv_gain_luts(const double* __restrict__ u, int n, double hgain,
                                       double sgain, double vgain, double* __restrict__ gains,
                                       unsigned char* __restrict__ luts) {
    const int total = n * 3 * 256;
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < total; k += gridDim.x * blockDim.x) {
        const int x = k & 255, c = (k >> 8) % 3, i = k / 768;
        const double gain = c == 0 ? hgain : (c == 1 ? sgain : vgain);
        const double r = __dadd_rn(__dmul_rn(__dsub_rn(__dmul_rn(u[i * 3 + c], 2.0), 1.0), gain), 1.0);
        if (x == 0) gains[i * 3 + c] = r;
        const double v = __dmul_rn((double)x, r);
        double q;
        if (c == 0) {
            q = fmod(v, 180.0);
            if (q != 0.0 && q < 0.0) q = __dadd_rn(q, 180.0);
        } else {
            q = v < 0.0 ? 0.0 : (v > 255.0 ? 255.0 : v);
        }
        luts[k] = (unsigned char)(int)q;  // in [0, 180] or [0, 255]: truncation
    }
}

// Each pixel: BGR (BIDX 0) or RGB (2) -> uint8 HSV (H in [0, 180)) -> its image's tables ->
// back, with cv2.cvtColor's arithmetic (color.cuh; vector_block as cupyprep_cvt_color's).
template <int BIDX>
__global__ void cupyprep_hsv_gain(const unsigned char* __restrict__ src,
                                  unsigned char* __restrict__ dst, int h, int w, cp::i64 s_n,
                                  cp::i64 s_y, cp::i64 s_x, cp::i64 s_c, cp::i64 d_n,
                                  cp::i64 d_y, cp::i64 d_x, cp::i64 d_c,
                                  const unsigned char* __restrict__ luts, int vector_block,
                                  cp::i64 total) {
    namespace cc = cp::color;
    const int vector_end = vector_block > 0 ? w / vector_block * vector_block : 0;
    const cp::i64 stride = (cp::i64)blockDim.x * gridDim.x;
    for (cp::i64 i = (cp::i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const cp::pixel px = cp::unflatten_pixel(i, h, w);
        const unsigned char* p = src + cp::pixel_offset(px, s_n, s_y, s_x);
        unsigned char* q = dst + cp::pixel_offset(px, d_n, d_y, d_x);
        const int a0 = p[0], g = p[s_c], a2 = p[2 * s_c];
        int hsv[3], bgr[3];
        cc::hsv_from_bgr_u8(BIDX == 0 ? a0 : a2, g, BIDX == 0 ? a2 : a0, 180, hsv);
        const unsigned char* lut = luts + px.n * 768;
        cc::bgr_from_hsv_u8(lut[hsv[0]], lut[256 + hsv[1]], lut[512 + hsv[2]], 180,
                            px.x < vector_end, bgr);
        q[0] = (unsigned char)bgr[BIDX == 0 ? 0 : 2];
        q[d_c] = (unsigned char)bgr[1];
        q[2 * d_c] = (unsigned char)bgr[BIDX == 0 ? 2 : 0];
    }
}

// --- color_jitter ----------------------------------------------------------------------------
// torchvision.transforms.v2.functional's adjust_brightness / contrast / saturation / hue, in
// float32, each operation rounded on its own (uncontracted) in the order of
// cupyprep.cpu.photometric (its NumPy twin). Integer images are stored as integers between
// the operations (truncated toward zero, as torchvision's .to(uint8)); float ones clamped to
// [0, 1]. Channels: R at 2 - BIDX, G at 1, B at BIDX.
namespace {

// torchvision's grayscale: 0.2989 R + 0.587 G + 0.114 B (floored for integer images)
template <bool INTEGER>
__device__ __forceinline__ float jitter_gray(float r, float g, float b) {
    const float y = __fadd_rn(__fadd_rn(__fmul_rn(r, 0.2989f), __fmul_rn(g, 0.587f)),
                              __fmul_rn(b, 0.114f));
    return INTEGER ? floorf(y) : y;
}

// _blend: x * ratio + other * (1 - ratio), clamped to [0, bound]
__device__ __forceinline__ float jitter_blend(float x, float ratio, float other, float rest,
                                              float bound) {
    const float y = __fadd_rn(__fmul_rn(x, ratio), __fmul_rn(other, rest));
    return fminf(fmaxf(y, 0.0f), bound);
}

// adjust_hue on one pixel in [0, 1]: torchvision's _rgb_to_hsv, h + hue mod 1, _hsv_to_rgb
__device__ __forceinline__ void jitter_hue(float* rgb, float hue) {
    const float r = rgb[0], g = rgb[1], b = rgb[2];
    const float maxc = fmaxf(fmaxf(r, g), b), minc = fminf(fminf(r, g), b);
    const bool eqc = maxc == minc;
    const float range = __fsub_rn(maxc, minc);
    const float s = __fdiv_rn(range, eqc ? 1.0f : maxc);
    const float div = eqc ? 1.0f : range;
    const float rc = __fdiv_rn(__fsub_rn(maxc, r), div);
    const float gc = __fdiv_rn(__fsub_rn(maxc, g), div);
    const float bc = __fdiv_rn(__fsub_rn(maxc, b), div);
    const float hr = maxc == r ? __fsub_rn(bc, gc) : 0.0f;
    const float hg = (maxc == g && maxc != r) ? __fsub_rn(__fadd_rn(rc, 2.0f), bc) : 0.0f;
    const float hb = (maxc != g && maxc != r) ? __fsub_rn(__fadd_rn(gc, 4.0f), rc) : 0.0f;
    float h = __fadd_rn(__fadd_rn(hr, hg), hb);
    h = fmodf(__fadd_rn(__fmul_rn(h, 1.0f / 6.0f), 1.0f), 1.0f);
    h = __fadd_rn(h, hue);  // then remainder 1 (floor modulo)
    h = fmodf(h, 1.0f);
    if (h != 0.0f && h < 0.0f) h = __fadd_rn(h, 1.0f);
    const float v = maxc;
    const float h6 = __fmul_rn(h, 6.0f);
    const float fi = floorf(h6);
    const float f = __fsub_rn(h6, fi);
    int i = (int)fi % 6;
    if (i < 0) i += 6;
    const float sxf = __fmul_rn(s, f);
    const float one_minus_s = __fsub_rn(1.0f, s);
    const float q = fminf(fmaxf(__fmul_rn(__fsub_rn(1.0f, sxf), v), 0.0f), 1.0f);
    const float t = fminf(fmaxf(__fmul_rn(__fadd_rn(sxf, one_minus_s), v), 0.0f), 1.0f);
    const float p = fminf(fmaxf(__fmul_rn(one_minus_s, v), 0.0f), 1.0f);
    const float rr[6] = {v, q, p, p, t, v}, gg[6] = {t, v, v, q, p, p}, bb[6] = {p, p, t, v, v, q};
    rgb[0] = rr[i];
    rgb[1] = gg[i];
    rgb[2] = bb[i];
}

__device__ __forceinline__ float jitter_load(unsigned char v) { return (float)v; }
__device__ __forceinline__ float jitter_load(float v) { return v; }

}  // namespace

// The parameters of each image from its uniforms u[i, 0..7] (float64 in [0, 1)): factor k
// = u[i, k] * span[k] + low[k] (span 0 and low neutral for an operation that is off), and
// the order: the operations' indices sorted by their keys u[i, 4..7] (ties by index).
// Zeroes sums (contrast's, filled by cupyprep_jitter_gray_sums). One thread an image.
__global__ void cupyprep_jitter_params(const double* __restrict__ u, int n, double low0,
                                       double low1, double low2, double low3, double span0,
                                       double span1, double span2, double span3,
                                       double* __restrict__ factors,
                                       long long* __restrict__ order, double* __restrict__ sums) {
    const double low[4] = {low0, low1, low2, low3}, span[4] = {span0, span1, span2, span3};
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const double* ui = u + (cp::i64)i * 8;
#pragma unroll
        for (int k = 0; k < 4; ++k) factors[i * 4 + k] = __dadd_rn(__dmul_rn(ui[k], span[k]), low[k]);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            int rank = 0;
#pragma unroll
            for (int k = 0; k < 4; ++k) rank += ui[4 + k] < ui[4 + j] || (ui[4 + k] == ui[4 + j] && k < j);
            order[i * 4 + rank] = j;
        }
        sums[i] = 0.0;
    }
}

namespace {

// Image n's operation at position `stage` of its order on one pixel (rgb in float32), then
// stored as the image type stores it (integers truncated, as between torchvision's ops).
template <bool INTEGER>
__device__ __forceinline__ void jitter_step(float* rgb, int op, double fd, float mean, int enabled) {
    if (!(enabled & (1 << op))) return;
    const float bound = INTEGER ? 255.0f : 1.0f;
    const float f = __double2float_rn(fd), rest = __double2float_rn(__dsub_rn(1.0, fd));
    if (op == 0) {
#pragma unroll
        for (int c = 0; c < 3; ++c) rgb[c] = fminf(fmaxf(__fmul_rn(rgb[c], f), 0.0f), bound);
    } else if (op == 1 || op == 2) {
        const float other = op == 1 ? mean : jitter_gray<INTEGER>(rgb[0], rgb[1], rgb[2]);
#pragma unroll
        for (int c = 0; c < 3; ++c) rgb[c] = jitter_blend(rgb[c], f, other, rest, bound);
    } else {
        if (INTEGER) {
#pragma unroll
            for (int c = 0; c < 3; ++c) rgb[c] = __fmul_rn(rgb[c], 1.0f / 255.0f);
        }
        jitter_hue(rgb, f);
        if (INTEGER) {
#pragma unroll
            for (int c = 0; c < 3; ++c) rgb[c] = __fmul_rn(rgb[c], 255.999f);
        }
    }
    if (INTEGER) {
#pragma unroll
        for (int c = 0; c < 3; ++c) {
            const int v = __float2int_rz(rgb[c]);
            rgb[c] = (float)(v < 0 ? 0 : (v > 255 ? 255 : v));
        }
    }
}

}  // namespace

// Per image, the sum (float64) of the grayscale (jitter_gray) of the image as contrast
// sees it (the operations before contrast in its order applied, pixel by pixel) into
// sums[blockIdx.y] (zeroed by cupyprep_jitter_params): contrast's mean. A block's threads
// take the image's pixels in a grid-stride loop, then reduce by warp, one atomicAdd a warp
// (for uint8 images every partial sum is an exact integer in double: the order does not
// matter).
template <typename T, int BIDX>
__global__ void cupyprep_jitter_gray_sums(const T* __restrict__ src, int h, int w, cp::i64 s_n,
                                          cp::i64 s_y, cp::i64 s_x, cp::i64 s_c,
                                          const double* __restrict__ factors,
                                          const long long* __restrict__ order, int enabled,
                                          double* __restrict__ sums) {
    constexpr bool INTEGER = cp::is_integer<T>::value;
    const int n = blockIdx.y;
    const cp::i64 hw = (cp::i64)h * w;
    int ops[4], before = 0;
#pragma unroll
    for (int s = 0; s < 4; ++s) {
        ops[s] = (int)order[n * 4 + s];
        if (ops[s] == 1) before = s;
    }
    double acc = 0.0;
    for (cp::i64 i = (cp::i64)blockIdx.x * blockDim.x + threadIdx.x; i < hw;
         i += (cp::i64)blockDim.x * gridDim.x) {
        const int y = (int)(i / w), x = (int)(i % w);
        const T* p = src + n * s_n + y * s_y + x * s_x;
        float rgb[3] = {jitter_load(p[(2 - BIDX) * s_c]), jitter_load(p[s_c]),
                        jitter_load(p[BIDX * s_c])};
        for (int s = 0; s < before; ++s) jitter_step<INTEGER>(rgb, ops[s], factors[n * 4 + ops[s]], 0.0f, enabled);
        acc += (double)jitter_gray<INTEGER>(rgb[0], rgb[1], rgb[2]);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if ((threadIdx.x & 31) == 0) atomicAdd(sums + n, acc);
}

// color_jitter on each pixel: image i's four operations in its order (order[i, 0..3]: 0
// brightness, 1 contrast, 2 saturation, 3 hue), each with its factor (factors[i, op],
// float64, rounded to float32 as torchvision's scalar arguments are) where its bit of
// `enabled` is set, contrast with the mean sums[i] / (h w). src may be dst.
template <typename T, int BIDX>
__global__ void cupyprep_jitter_apply(const T* src, T* dst, int h, int w, cp::i64 s_n,
                                      cp::i64 s_y, cp::i64 s_x, cp::i64 s_c, cp::i64 d_n,
                                      cp::i64 d_y, cp::i64 d_x, cp::i64 d_c,
                                      const double* __restrict__ factors,
                                      const long long* __restrict__ order,
                                      const double* __restrict__ sums, int enabled,
                                      cp::i64 total) {
    constexpr bool INTEGER = cp::is_integer<T>::value;
    const double area = (double)h * (double)w;
    const cp::i64 stride = (cp::i64)blockDim.x * gridDim.x;
    for (cp::i64 i = (cp::i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const cp::pixel px = cp::unflatten_pixel(i, h, w);
        const T* p = src + cp::pixel_offset(px, s_n, s_y, s_x);
        T* q = dst + cp::pixel_offset(px, d_n, d_y, d_x);
        const float mean = (enabled & 2) ? __double2float_rn(__ddiv_rn(sums[px.n], area)) : 0.0f;
        float rgb[3] = {jitter_load(p[(2 - BIDX) * s_c]), jitter_load(p[s_c]),
                        jitter_load(p[BIDX * s_c])};
#pragma unroll
        for (int s = 0; s < 4; ++s) {
            const int op = (int)order[px.n * 4 + s];
            jitter_step<INTEGER>(rgb, op, factors[px.n * 4 + op], mean, enabled);
        }
        T out[3];
#pragma unroll
        for (int c = 0; c < 3; ++c) out[c] = (T)rgb[c];  // integers: already whole, in [0, 255]
        q[(2 - BIDX) * d_c] = out[0];
        q[d_c] = out[1];
        q[BIDX * d_c] = out[2];
    }
}
