// Shared device code for every cupyprep kernel.
//
// Compiled three ways: by NVRTC through cupy.RawModule (the GPU), by NVRTC alone in CI
// (a compile check with no GPU), and by the host C++ compiler under the kernel emulator
// (cupyprep.testing), which defines CUPYPREP_EMULATOR and provides the CUDA built-ins.
// Keep it to plain C++17 plus CUDA built-ins the emulator knows.
#pragma once

// float16 storage type: a 16-bit pattern, converted explicitly. Kept as our own struct
// (not cuda_fp16.h's __half) so the sources need no CUDA headers under NVRTC or the emulator.
struct cp_half {
    unsigned short bits;
};

#ifndef CUPYPREP_EMULATOR
__device__ __forceinline__ unsigned short cupyprep_f32_to_f16_bits(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
__device__ __forceinline__ float cupyprep_f16_bits_to_f32(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
#endif

namespace cp {

typedef long long i64;

// Stored integer element types (uint8, uint16) take OpenCV's fixed-point paths.
template <typename T> struct is_integer { static constexpr bool value = false; };
template <> struct is_integer<unsigned char> { static constexpr bool value = true; };
template <> struct is_integer<unsigned short> { static constexpr bool value = true; };

template <typename T> __device__ __forceinline__ T clamp_index(T v, T lo, T hi) {
    return v < lo ? lo : (v > hi ? hi : v);
}

// --- borders --------------------------------------------------------------------------
// Border modes, numbered as the specs' BORDER_MODES: OpenCV's constant, replicate,
// reflect (fedcba|abcdefgh|hgfedcb), reflect101 (gfedcb|abcdefgh|gfedcba) and wrap.
constexpr int BORDER_CONSTANT = 0, BORDER_REPLICATE = 1, BORDER_REFLECT = 2,
              BORDER_REFLECT101 = 3, BORDER_WRAP = 4;

// A source index outside [0, len): OpenCV's borderInterpolate (periodic forms in closed
// form, so far-away coordinates cost no loop); -1 for a constant border. A one-pixel axis
// replicates, as borderInterpolate's reflect101 and OpenCV's warps make it (reflect and
// wrap give the same there).
__device__ __forceinline__ int border_index(int p, int len, int border) {
    if ((unsigned)p < (unsigned)len) return p;
    if (border == BORDER_CONSTANT) return -1;
    if (border == BORDER_REPLICATE || len == 1) return p < 0 ? 0 : len - 1;
    if (border == BORDER_WRAP) {
        int q = p % len;
        return q < 0 ? q + len : q;
    }
    const int period = border == BORDER_REFLECT ? 2 * len : 2 * len - 2;
    int q = p % period;
    if (q < 0) q += period;
    if (border == BORDER_REFLECT) return q < len ? q : period - 1 - q;
    return q < len ? q : period - q;
}

// --- element conversions -------------------------------------------------------------
// to_float: any stored element type to float32 (exact for uint8/uint16/float16).
__device__ __forceinline__ float to_float(unsigned char v) { return (float)v; }
__device__ __forceinline__ float to_float(unsigned short v) { return (float)v; }
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(cp_half v) { return cupyprep_f16_bits_to_f32(v.bits); }

// from_float<T>: float32 to a stored element type the way OpenCV's saturate_cast does it:
// integers round half to even (cvRound) and saturate; float16 rounds to nearest even.
template <typename T> __device__ __forceinline__ T from_float(float v);

template <> __device__ __forceinline__ unsigned char from_float<unsigned char>(float v) {
    int i = __float2int_rn(v);
    return (unsigned char)(i < 0 ? 0 : (i > 255 ? 255 : i));
}
template <> __device__ __forceinline__ unsigned short from_float<unsigned short>(float v) {
    int i = __float2int_rn(v);
    return (unsigned short)(i < 0 ? 0 : (i > 65535 ? 65535 : i));
}
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ cp_half from_float<cp_half>(float v) {
    cp_half h;
    h.bits = cupyprep_f32_to_f16_bits(v);
    return h;
}

// --- pixel addressing ----------------------------------------------------------------
// Per-pixel kernels run a grid-stride loop over a flat index i in [0, N*H*W), x fastest;
// unflatten_pixel splits it back into (n, y, x), and pixel_offset turns that into an element
// offset through explicit strides (64-bit: a batch can pass 2^31 elements).
struct pixel {
    i64 n;
    int y, x;
};

__device__ __forceinline__ pixel unflatten_pixel(i64 i, int h, int w) {
    pixel p;
    p.x = (int)(i % w);
    const i64 r = i / w;
    p.y = (int)(r % h);
    p.n = r / h;
    return p;
}

__device__ __forceinline__ i64 pixel_offset(const pixel& p, i64 s_n, i64 s_y, i64 s_x) {
    return p.n * s_n + p.y * s_y + (i64)p.x * s_x;
}

// --- arguments by value ---------------------------------------------------------------
// N values of type T as one kernel parameter, passed by value and read in place through
// __grid_constant__: nothing to upload per call, and a CUDA graph that captures the launch
// keeps the values. _kernels.by_value packs one from the host.
template <typename T, int N>
struct ByValue {
    T v[N];
};

// Images whose per-image data a kernel takes by value (a list's records, preprocess's
// plans, PreprocessMeta's mapping); longer lists go through a device table.
// _kernels.IMAGES_BY_VALUE is the same number.
constexpr int kImagesByValue = 64;

// --- ragged batches -------------------------------------------------------------------
// One image of a list of images of different sizes: the address of its first element and
// its geometry (strides in elements). A kernel over such a list takes up to kImagesByValue
// records by value, as a ByValue<RaggedImage, kImagesByValue>, or, for a longer list,
// reads them from a device table where that is given.
struct RaggedImage {
    unsigned long long ptr;
    int h, w;
    i64 s_y, s_x, s_c;
};

__device__ __forceinline__ unsigned char saturate_u8(int v) {
    return (unsigned char)(v < 0 ? 0 : (v > 255 ? 255 : v));
}

// Normalize's arithmetic, shared by normalize and preprocess so both give the same bits:
// out[c] = (v[k] * scale - mean[c]) * inv_std[c] in float32, uncontracted, with k = c or,
// when swap_rb, the first three channels reversed (1 / std rounded once on the host).
__device__ __forceinline__ float normalized(float v, float scale, float mean, float inv_std) {
    return __fmul_rn(__fsub_rn(__fmul_rn(v, scale), mean), inv_std);
}

template <int CN>
__device__ __forceinline__ int source_channel(int c, bool swap_rb) {
    return (CN >= 3 && swap_rb && c < 3) ? 2 - c : c;
}

// Channel c of a pixel's normalized values. v[k] is the pixel's channel k in source order
// as a float: an array of them, or source_pixel's elements read where they are used.
template <int CN, typename V>
__device__ __forceinline__ float normalized_channel(const V& v, int c, bool swap_rb, float scale,
                                                    const float* mean, const float* inv_std) {
    return normalized(v[source_channel<CN>(c, swap_rb)], scale, mean[c], inv_std[c]);
}

// A pixel's elements (channel k at p[o + k]), as floats.
template <typename T>
struct source_pixel {
    const T* p;
    int o;
    __device__ __forceinline__ float operator[](int k) const { return to_float(p[o + k]); }
};

template <typename TOut, int CN>
__device__ __forceinline__ void store_normalized(TOut* q, i64 d_c, const float (&v)[CN],
                                                 bool swap_rb, float scale, const float* mean,
                                                 const float* inv_std) {
#pragma unroll
    for (int c = 0; c < CN; ++c)
        q[c * d_c] = from_float<TOut>(normalized_channel<CN>(v, c, swap_rb, scale, mean, inv_std));
}

// Two values as the bits of a float16 pair (a low, b high).
__device__ __forceinline__ unsigned half2_bits(float a, float b) {
#if !defined(CUPYPREP_EMULATOR) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned bits;  // one conversion instruction for both: b to the high half, a to the low
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(bits) : "f"(b), "f"(a));
    return bits;
#else
    return (unsigned)cupyprep_f32_to_f16_bits(a) | ((unsigned)cupyprep_f32_to_f16_bits(b) << 16);
#endif
}

// Two values (adjacent elements: two pixels of one channel, or a pixel's two channels),
// converted, as one store of 2 * sizeof(TOut) bytes at q (aligned to that size).
__device__ __forceinline__ void store_pair(float* q, float a, float b) {
    *reinterpret_cast<float2*>(q) = make_float2(a, b);
}
__device__ __forceinline__ void store_pair(cp_half* q, float a, float b) {
    *reinterpret_cast<unsigned*>(q) = half2_bits(a, b);
}
__device__ __forceinline__ void store_pair(unsigned char* q, float a, float b) {
    *reinterpret_cast<unsigned short*>(q) = (unsigned short)(
        from_float<unsigned char>(a) | ((unsigned)from_float<unsigned char>(b) << 8));
}

// Four values, converted, as one store of 4 * sizeof(TOut) bytes at q (aligned to that size).
__device__ __forceinline__ void store_quad(float* q, const float (&e)[4]) {
    *reinterpret_cast<float4*>(q) = make_float4(e[0], e[1], e[2], e[3]);
}
__device__ __forceinline__ void store_quad(cp_half* q, const float (&e)[4]) {
    *reinterpret_cast<uint2*>(q) = make_uint2(half2_bits(e[0], e[1]), half2_bits(e[2], e[3]));
}

// Whether store_pixel takes pixels of CN elements of TOut: 2 or 4 channels, 8 or 16 bytes
// (H200, 64 x 512^2 uint8 into NHWC: 4 channels float32 0.136 -> 0.089 ms, float16 0.063
// -> 0.061, 2 channels float32 0.053 -> 0.046; the 4-byte pixels of 4 channels uint8 and 2
// channels float16 measured 1.4% and 0.6% slower than element stores).
template <typename TOut, int CN>
struct pixel_store {
    static constexpr bool value = (CN == 2 || CN == 4) && CN * sizeof(TOut) >= 8;
};

// A pixel's CN converted values as one store at q, aligned to the pixel's size.
template <typename TOut, int CN>
__device__ __forceinline__ void store_pixel(TOut* q, const float (&e)[CN]) {
    if constexpr (CN == 2)
        store_pair(q, e[0], e[1]);
    else
        store_quad(q, e);
}

// store_normalized for a thread's PX adjacent pixels (the first `count` of them real; v[p]
// pixel p, q the first one's channel 0). Two pixels go as pairs of elements, one store each
// (store_pair), where q is aligned to a pair: with planar channels (d_x == 1, an even
// plane stride), one pair per plane; with interleaved channels (INTERLEAVED, for NHWC
// outputs: d_c == 1 and d_x == CN), the two pixels' 2 * CN adjacent elements as CN pairs.
// Others element by element. INTERLEAVED is a template parameter so that the planar
// variants' code stays as it is (a run-time choice between the two cost W1 4% and W1a 9%).
template <typename TOut, int CN, int PX, bool INTERLEAVED>
__device__ __forceinline__ void store_normalized_px(TOut* q, int count, i64 d_x, i64 d_c,
                                                    const float (&v)[PX][CN], bool swap_rb,
                                                    float scale, const float* mean,
                                                    const float* inv_std) {
    constexpr unsigned long long pair_mask = 2 * sizeof(TOut) - 1;
    if constexpr (PX == 2 && INTERLEAVED) {
        if (count == 2 && d_c == 1 && d_x == CN && ((unsigned long long)q & pair_mask) == 0) {
            float e[2 * CN];  // memory order: pixel 0's channels, then pixel 1's
#pragma unroll
            for (int p = 0; p < 2; ++p)
#pragma unroll
                for (int c = 0; c < CN; ++c)
                    e[p * CN + c] =
                        normalized_channel<CN>(v[p], c, swap_rb, scale, mean, inv_std);
#pragma unroll
            for (int k = 0; k < CN; ++k) store_pair(q + 2 * k, e[2 * k], e[2 * k + 1]);
            return;
        }
    } else if constexpr (PX == 2) {
        if (count == 2 && d_x == 1 && (d_c & 1) == 0 && ((unsigned long long)q & pair_mask) == 0) {
#pragma unroll
            for (int c = 0; c < CN; ++c)
                store_pair(q + c * d_c,
                           normalized_channel<CN>(v[0], c, swap_rb, scale, mean, inv_std),
                           normalized_channel<CN>(v[1], c, swap_rb, scale, mean, inv_std));
            return;
        }
    }
#pragma unroll
    for (int p = 0; p < PX; ++p)
        if (p < count)
            store_normalized<TOut, CN>(q + p * d_x, d_c, v[p], swap_rb, scale, mean, inv_std);
}

}  // namespace cp
