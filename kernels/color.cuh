// Per-pixel color-space conversions with cv2.cvtColor's arithmetic (OpenCV's own code, not
// IPP), shared by color.cu (cvt_color) and photometric.cu (hsv_gain).
//
// uint8 HSV and YCrCb are OpenCV's integer and float32 formulas operation for operation, so
// results are equal to cv2.cvtColor's bit for bit. Two details decide that:
// * OpenCV's x86 builds contract v * (1 - s * f) into a fused multiply-add, in its vector
//   and scalar code alike: written here as __fmaf_rn.
// * HSV -> BGR for uint8 converts a row in blocks of the CPU's vector width (64 pixels with
//   AVX-512, 32 with AVX2), truncating v * 255, and the row's last width % block pixels in
//   scalar code, which rounds instead (and takes the sector from fmod / floor): up to 1
//   apart. The kernels take the block as an argument and follow the same split.
#pragma once
#include "common.cuh"

namespace cp {
namespace color {

// BGR -> HSV, uint8 (RGB2HSV_b): H in [0, hrange) (hrange 180, or 256 for the _FULL codes),
// S and V in [0, 255]. The division tables of OpenCV (sdiv = round((255 << 12) / v),
// hdiv = round((hrange << 12) / (6 diff)), in double, half to even) are computed in place.
__device__ __forceinline__ void hsv_from_bgr_u8(int b, int g, int r, int hrange, int* hsv) {
    const int v = max(b, max(g, r));
    const int vmin = min(b, min(g, r));
    const int diff = v - vmin;
    const int sdiv = v ? __double2int_rn(__ddiv_rn((double)(255 << 12), (double)v)) : 0;
    const int hdiv =
        diff ? __double2int_rn(__ddiv_rn((double)(hrange << 12), 6.0 * (double)diff)) : 0;
    const int s = (diff * sdiv + (1 << 11)) >> 12;
    int h = v == r ? g - b : (v == g ? b - r + 2 * diff : r - g + 4 * diff);
    h = h * hdiv + (1 << 11);
    h = h >= 0 ? h >> 12 : -((-h + 4095) >> 12);  // an arithmetic shift (floor) of a negative
    h += h < 0 ? hrange : 0;
    hsv[0] = min(h, 255);
    hsv[1] = s;
    hsv[2] = v;
}

// The sector formula both HSV -> BGR conversions end in (OpenCV's tab and sector_data):
// v, s in [0, 1], the sector 0..5 and its fraction f -> b, g, r in [0, 1].
__device__ __forceinline__ void bgr_from_hsv_sector(float s, float v, int sector, float f, float* bgr) {
    float tab[4];
    tab[0] = v;
    tab[1] = __fmul_rn(v, __fsub_rn(1.0f, s));
    tab[2] = __fmul_rn(v, __fmaf_rn(-s, f, 1.0f));
    tab[3] = __fmul_rn(v, __fmaf_rn(-s, __fsub_rn(1.0f, f), 1.0f));
    // which of tab is b, g, r in each sector
    const int b_of[6] = {1, 1, 3, 0, 0, 2}, g_of[6] = {3, 0, 0, 2, 1, 1},
              r_of[6] = {0, 2, 1, 1, 3, 0};
    bgr[0] = tab[b_of[sector]];
    bgr[1] = tab[g_of[sector]];
    bgr[2] = tab[r_of[sector]];
}

// HSV -> BGR, uint8 (HSV2RGB_b): hrange 180, or 255 for the _FULL codes (OpenCV's value).
// vector: OpenCV's vector code (sector by truncation, v * 255 truncated) rather than its
// scalar code (sector from fmod / floor, v * 255 rounded half to even).
__device__ __forceinline__ void bgr_from_hsv_u8(int hi, int si, int vi, int hrange, bool vector,
                                                int* bgr) {
    const float hscale = __fdiv_rn(6.0f, (float)hrange);
    const float s = __fmul_rn((float)si, 1.0f / 255.0f);
    const float v = __fmul_rn((float)vi, 1.0f / 255.0f);
    float f;
    int sector;
    if (vector) {
        const float hx = __fmul_rn((float)hi, hscale);
        const float pre = truncf(hx);
        f = __fsub_rn(hx, pre);
        sector = (int)__fsub_rn(pre, __fmul_rn(truncf(__fmul_rn(pre, 1.0f / 6.0f)), 6.0f));
    } else {
        const float hx = fmodf(__fmul_rn((float)hi, hscale), 6.0f);
        sector = (int)floorf(hx);
        f = __fsub_rn(hx, (float)sector);
        if ((unsigned)sector >= 6u) sector = 0, f = 0.0f;
    }
    float out[3];
    bgr_from_hsv_sector(s, v, sector, f, out);
#pragma unroll
    for (int c = 0; c < 3; ++c) {
        const float x = __fmul_rn(out[c], 255.0f);
        const int q = vector ? __float2int_rz(x) : __float2int_rn(x);
        bgr[c] = q < 0 ? 0 : (q > 255 ? 255 : q);
    }
}

// BGR -> HSV, float32 (OpenCV's vector formula, RGB2HSV_f): H in [0, 360), S, V as V = max.
__device__ __forceinline__ void hsv_from_bgr_f32(float b, float g, float r, float* hsv) {
    const float eps = 1.1920928955078125e-07f;  // FLT_EPSILON
    const float vmax = fmaxf(fmaxf(r, g), b), vmin = fminf(fminf(r, g), b);
    const float diff = __fsub_rn(vmax, vmin);
    const float s = __fdiv_rn(diff, __fadd_rn(fabsf(vmax), eps));
    float h, base;
    if (r == vmax) {
        h = __fsub_rn(g, b);
        base = g < b ? 360.0f : 0.0f;
    } else if (g == vmax) {
        h = __fsub_rn(b, r);
        base = 120.0f;
    } else {
        h = __fsub_rn(r, g);
        base = 240.0f;
    }
    const float rev = __fdiv_rn(60.0f, __fadd_rn(diff, eps));
    hsv[0] = __fmaf_rn(h, rev, base);
    hsv[1] = s;
    hsv[2] = vmax;
}

// HSV -> BGR, float32 (HSV2RGB_f, OpenCV's scalar formula): H in degrees, S, V as they come.
__device__ __forceinline__ void bgr_from_hsv_f32(float h, float s, float v, float* bgr) {
    if (s == 0.0f) {
        bgr[0] = bgr[1] = bgr[2] = v;
        return;
    }
    float hx = fmodf(__fmul_rn(h, 1.0f / 60.0f), 6.0f);
    int sector = (int)floorf(hx);
    float f = __fsub_rn(hx, (float)sector);
    if ((unsigned)sector >= 6u) sector = 0, f = 0.0f;
    bgr_from_hsv_sector(s, v, sector, f, bgr);
}

// BT.601 YCrCb (OpenCV's RGB2YCrCb_i / YCrCb2RGB_i, 14-bit fixed point; _f in float32).
constexpr int kYuvShift = 14;
constexpr int kR2Y = 4899, kG2Y = 9617, kB2Y = 1868, kYCrI = 11682, kYCbI = 9241;
constexpr int kCr2RI = 22987, kCr2GI = -11698, kCb2GI = -5636, kCb2BI = 29049;

__device__ __forceinline__ int descale(int x) {
    return (x + (1 << (kYuvShift - 1))) >> kYuvShift;  // OpenCV's CV_DESCALE
}

__device__ __forceinline__ void ycrcb_from_bgr_u8(int b, int g, int r, int* ycc) {
    const int y = descale(b * kB2Y + g * kG2Y + r * kR2Y);
    const int cr = descale((r - y) * kYCrI + (128 << kYuvShift));
    const int cb = descale((b - y) * kYCbI + (128 << kYuvShift));
    ycc[0] = saturate_u8(y);
    ycc[1] = saturate_u8(cr);
    ycc[2] = saturate_u8(cb);
}

__device__ __forceinline__ void bgr_from_ycrcb_u8(int y, int cr, int cb, int* bgr) {
    bgr[0] = saturate_u8(y + descale((cb - 128) * kCb2BI));
    bgr[1] = saturate_u8(y + descale((cb - 128) * kCb2GI + (cr - 128) * kCr2GI));
    bgr[2] = saturate_u8(y + descale((cr - 128) * kCr2RI));
}

// float32 (OpenCV's vector code, fused multiply-adds): Y = B*0.114 + G*0.587 + R*0.299 in
// the order of the source channels c0, c1, c2 (w0 weights c0), Cr/Cb offset by 0.5.
__device__ __forceinline__ void ycrcb_from_bgr_f32(float c0, float c1, float c2, float w0,
                                                   float w2, float b, float r, float* ycc) {
    const float y = __fmaf_rn(c0, w0, __fmaf_rn(c1, 0.587f, __fmul_rn(c2, w2)));
    ycc[0] = y;
    ycc[1] = __fmaf_rn(__fsub_rn(r, y), 0.713f, 0.5f);
    ycc[2] = __fmaf_rn(__fsub_rn(b, y), 0.564f, 0.5f);
}

__device__ __forceinline__ void bgr_from_ycrcb_f32(float y, float cr, float cb, float* bgr) {
    const float dcr = __fsub_rn(cr, 0.5f), dcb = __fsub_rn(cb, 0.5f);
    bgr[0] = __fmaf_rn(dcb, 1.773f, y);
    bgr[1] = __fmaf_rn(dcr, -0.714f, __fmaf_rn(dcb, -0.344f, y));
    bgr[2] = __fmaf_rn(dcr, 1.403f, y);
}

}  // namespace color
}  // namespace cp
