// CUDA built-ins for the CPU kernel emulator (cupyprep.testing).
//
// Force-included (g++ -include) before a kernel source compiled for the host. It maps the
// CUDA declaration specifiers to host C++, declares the thread-index built-ins the
// scheduler in emu_runner.cpp sets, and provides the intrinsics, atomics, warp functions
// and math names the kernels may use. CUDA features the emulator does not model are
// declared deleted here (the compiler error names them); the Python side also scans
// each source for them first and raises UnsupportedFeatureError.
//
// Everything the scheduler implements lives in namespace cupyprep_emu; the definitions
// are in emu_runner.cpp, compiled into the same translation unit after the kernel.
#pragma once

#ifndef CUPYPREP_EMULATOR
#error "emu_cuda.h is only for the cupyprep kernel emulator (define CUPYPREP_EMULATOR)"
#endif

// System headers first: the CUDA macros below (__noinline__ in particular) would break
// library headers that spell attributes with the same names.
#include <cassert>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <math.h>
#include <type_traits>
#include <utility>

// --- declaration specifiers ------------------------------------------------------------
#define __global__
#define __device__
#define __host__
// Not `inline`: sources may write `inline __forceinline__`, which g++ rejects as a
// duplicate. Everything is one translation unit, so plain definitions are fine.
#define __forceinline__ __attribute__((unused))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __grid_constant__
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_align__(n) __attribute__((aligned(n)))
#define __constant__
// One instance per kernel instantiation, shared by every thread of the block. Blocks run
// one after another, so one instance serves each block in turn; unlike the GPU, a block
// starts with whatever the previous block left there (not with undefined contents).
#define __shared__ static
#define __managed__ __cupyprep_emulator_unsupported_managed_memory__

// --- vector types ------------------------------------------------------------------------
struct uint3 {
    unsigned int x, y, z;
};
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
        : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};

// CUDA's alignments: 2- and 4-component types are aligned to their full size (up to 16),
// 1- and 3-component types to their element.
#define CUPYPREP_EMU_VEC124(T, N)                                                        \
    struct N##1 { T x; };                                                                \
    struct alignas(2 * sizeof(T) > 16 ? 16 : 2 * sizeof(T)) N##2 { T x, y; };            \
    struct alignas(4 * sizeof(T) > 16 ? 16 : 4 * sizeof(T)) N##4 { T x, y, z, w; };      \
    inline N##1 make_##N##1(T x) { return N##1{x}; }                                     \
    inline N##2 make_##N##2(T x, T y) { return N##2{x, y}; }                             \
    inline N##4 make_##N##4(T x, T y, T z, T w) { return N##4{x, y, z, w}; }
#define CUPYPREP_EMU_VEC3(T, N)                                                          \
    struct N##3 { T x, y, z; };                                                          \
    inline N##3 make_##N##3(T x, T y, T z) { return N##3{x, y, z}; }
#define CUPYPREP_EMU_VEC(T, N) CUPYPREP_EMU_VEC124(T, N) CUPYPREP_EMU_VEC3(T, N)

CUPYPREP_EMU_VEC(signed char, char)
CUPYPREP_EMU_VEC(unsigned char, uchar)
CUPYPREP_EMU_VEC(short, short)
CUPYPREP_EMU_VEC(unsigned short, ushort)
CUPYPREP_EMU_VEC(int, int)
CUPYPREP_EMU_VEC124(unsigned int, uint)  // uint3 is the index type above
CUPYPREP_EMU_VEC(long, long)
CUPYPREP_EMU_VEC(unsigned long, ulong)
CUPYPREP_EMU_VEC(long long, longlong)
CUPYPREP_EMU_VEC(unsigned long long, ulonglong)
CUPYPREP_EMU_VEC(float, float)
CUPYPREP_EMU_VEC(double, double)
#undef CUPYPREP_EMU_VEC
#undef CUPYPREP_EMU_VEC3
#undef CUPYPREP_EMU_VEC124
inline uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) { return uint3{x, y, z}; }

// --- scheduler interface (defined in emu_runner.cpp) -------------------------------------
namespace cupyprep_emu {
enum WarpOp : int {
    kShflIdx = 1,
    kShflUp,
    kShflDown,
    kShflXor,
    kBallot,
    kAny,
    kAll,
    kSyncWarp,
};
enum BarrierOp : int { kBarSync = 0, kBarCount, kBarAnd, kBarOr };

extern uint3 g_threadIdx;
extern uint3 g_blockIdx;
extern dim3 g_blockDim;
extern dim3 g_gridDim;

int barrier(int op, int predicate);
unsigned long long warp_op(int op, const char* name, unsigned mask, unsigned long long value,
                           int arg, int width);
unsigned active_mask();
[[noreturn]] void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

template <typename T> inline unsigned long long to_bits(T v) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                  "warp shuffles take types of at most 8 bytes");
    unsigned long long b = 0;
    std::memcpy(&b, &v, sizeof(T));
    return b;
}
template <typename T> inline T from_bits(unsigned long long b) {
    T v;
    std::memcpy(&v, &b, sizeof(T));
    return v;
}
template <typename To, typename From> inline To bit_cast(From v) {
    static_assert(sizeof(To) == sizeof(From), "bit_cast between types of different size");
    To t;
    std::memcpy(&t, &v, sizeof(To));
    return t;
}
}  // namespace cupyprep_emu

// Read-only views of the scheduler's per-thread values.
static const uint3& threadIdx = cupyprep_emu::g_threadIdx;
static const uint3& blockIdx = cupyprep_emu::g_blockIdx;
static const dim3& blockDim = cupyprep_emu::g_blockDim;
static const dim3& gridDim = cupyprep_emu::g_gridDim;
constexpr int warpSize = 32;

// --- synchronisation -----------------------------------------------------------------------
inline void __syncthreads() { cupyprep_emu::barrier(cupyprep_emu::kBarSync, 1); }
inline int __syncthreads_count(int p) { return cupyprep_emu::barrier(cupyprep_emu::kBarCount, p); }
inline int __syncthreads_and(int p) { return cupyprep_emu::barrier(cupyprep_emu::kBarAnd, p); }
inline int __syncthreads_or(int p) { return cupyprep_emu::barrier(cupyprep_emu::kBarOr, p); }
// Threads run one at a time and switch only at barriers and warp collectives, so every
// write is already visible to every later reader: fences have nothing to do.
inline void __threadfence() {}
inline void __threadfence_block() {}
inline void __threadfence_system() {}

// --- warp functions --------------------------------------------------------------------------
inline void __syncwarp(unsigned mask = 0xffffffffu) {
    cupyprep_emu::warp_op(cupyprep_emu::kSyncWarp, "__syncwarp", mask, 0, 0, 32);
}
inline unsigned __activemask() { return cupyprep_emu::active_mask(); }
inline unsigned __ballot_sync(unsigned mask, int pred) {
    return (unsigned)cupyprep_emu::warp_op(cupyprep_emu::kBallot, "__ballot_sync", mask,
                                           pred != 0, 0, 32);
}
inline int __any_sync(unsigned mask, int pred) {
    return (int)cupyprep_emu::warp_op(cupyprep_emu::kAny, "__any_sync", mask, pred != 0, 0, 32);
}
inline int __all_sync(unsigned mask, int pred) {
    return (int)cupyprep_emu::warp_op(cupyprep_emu::kAll, "__all_sync", mask, pred != 0, 0, 32);
}
template <typename T> inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32) {
    return cupyprep_emu::from_bits<T>(cupyprep_emu::warp_op(
        cupyprep_emu::kShflIdx, "__shfl_sync", mask, cupyprep_emu::to_bits(var), src_lane, width));
}
template <typename T> inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
    return cupyprep_emu::from_bits<T>(cupyprep_emu::warp_op(cupyprep_emu::kShflUp, "__shfl_up_sync",
                                                            mask, cupyprep_emu::to_bits(var),
                                                            (int)delta, width));
}
template <typename T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
    return cupyprep_emu::from_bits<T>(cupyprep_emu::warp_op(cupyprep_emu::kShflDown,
                                                            "__shfl_down_sync", mask,
                                                            cupyprep_emu::to_bits(var),
                                                            (int)delta, width));
}
template <typename T> inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32) {
    return cupyprep_emu::from_bits<T>(cupyprep_emu::warp_op(cupyprep_emu::kShflXor,
                                                            "__shfl_xor_sync", mask,
                                                            cupyprep_emu::to_bits(var), lane_mask,
                                                            width));
}

// --- atomics ----------------------------------------------------------------------------------
// Threads never run concurrently, so a plain read-modify-write is atomic. The loads and
// stores are instrumented like any other, so an out-of-bounds atomic is reported.
#define CUPYPREP_EMU_ATOMIC(NAME, T, EXPR)                                                  \
    inline T NAME(T* address, T val) {                                                     \
        T old = *address;                                                                  \
        *address = (EXPR);                                                                 \
        return old;                                                                        \
    }
// Integer adds wrap like the hardware's (no signed-overflow UB).
CUPYPREP_EMU_ATOMIC(atomicAdd, int, (int)((unsigned)old + (unsigned)val))
CUPYPREP_EMU_ATOMIC(atomicAdd, unsigned int, old + val)
CUPYPREP_EMU_ATOMIC(atomicAdd, unsigned long long, old + val)
CUPYPREP_EMU_ATOMIC(atomicAdd, float, old + val)
CUPYPREP_EMU_ATOMIC(atomicAdd, double, old + val)
CUPYPREP_EMU_ATOMIC(atomicSub, int, (int)((unsigned)old - (unsigned)val))
CUPYPREP_EMU_ATOMIC(atomicSub, unsigned int, old - val)
CUPYPREP_EMU_ATOMIC(atomicExch, int, val)
CUPYPREP_EMU_ATOMIC(atomicExch, unsigned int, val)
CUPYPREP_EMU_ATOMIC(atomicExch, unsigned long long, val)
CUPYPREP_EMU_ATOMIC(atomicExch, float, val)
CUPYPREP_EMU_ATOMIC(atomicMax, int, old > val ? old : val)
CUPYPREP_EMU_ATOMIC(atomicMax, unsigned int, old > val ? old : val)
CUPYPREP_EMU_ATOMIC(atomicMax, long long, old > val ? old : val)
CUPYPREP_EMU_ATOMIC(atomicMax, unsigned long long, old > val ? old : val)
CUPYPREP_EMU_ATOMIC(atomicMin, int, old < val ? old : val)
CUPYPREP_EMU_ATOMIC(atomicMin, unsigned int, old < val ? old : val)
CUPYPREP_EMU_ATOMIC(atomicMin, long long, old < val ? old : val)
CUPYPREP_EMU_ATOMIC(atomicMin, unsigned long long, old < val ? old : val)
CUPYPREP_EMU_ATOMIC(atomicAnd, int, old & val)
CUPYPREP_EMU_ATOMIC(atomicAnd, unsigned int, old & val)
CUPYPREP_EMU_ATOMIC(atomicAnd, unsigned long long, old & val)
CUPYPREP_EMU_ATOMIC(atomicOr, int, old | val)
CUPYPREP_EMU_ATOMIC(atomicOr, unsigned int, old | val)
CUPYPREP_EMU_ATOMIC(atomicOr, unsigned long long, old | val)
CUPYPREP_EMU_ATOMIC(atomicXor, int, old ^ val)
CUPYPREP_EMU_ATOMIC(atomicXor, unsigned int, old ^ val)
CUPYPREP_EMU_ATOMIC(atomicXor, unsigned long long, old ^ val)
CUPYPREP_EMU_ATOMIC(atomicInc, unsigned int, old >= val ? 0u : old + 1u)
CUPYPREP_EMU_ATOMIC(atomicDec, unsigned int, (old == 0u || old > val) ? val : old - 1u)
#undef CUPYPREP_EMU_ATOMIC

#define CUPYPREP_EMU_CAS(T)                                                                 \
    inline T atomicCAS(T* address, T compare, T val) {                                     \
        T old = *address;                                                                  \
        if (old == compare) *address = val;                                                \
        return old;                                                                        \
    }
CUPYPREP_EMU_CAS(int)
CUPYPREP_EMU_CAS(unsigned int)
CUPYPREP_EMU_CAS(unsigned long long)
CUPYPREP_EMU_CAS(unsigned short)
#undef CUPYPREP_EMU_CAS

// Scoped variants: one block runs at a time, so every scope is the same here.
#define atomicAdd_block atomicAdd
#define atomicAdd_system atomicAdd
#define atomicSub_block atomicSub
#define atomicSub_system atomicSub
#define atomicExch_block atomicExch
#define atomicExch_system atomicExch
#define atomicMax_block atomicMax
#define atomicMax_system atomicMax
#define atomicMin_block atomicMin
#define atomicMin_system atomicMin
#define atomicAnd_block atomicAnd
#define atomicAnd_system atomicAnd
#define atomicOr_block atomicOr
#define atomicOr_system atomicOr
#define atomicXor_block atomicXor
#define atomicXor_system atomicXor
#define atomicCAS_block atomicCAS
#define atomicCAS_system atomicCAS

// --- integer intrinsics -----------------------------------------------------------------------
inline int __popc(unsigned int x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
inline unsigned int __brev(unsigned int x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
    x = ((x >> 8) & 0x00ff00ffu) | ((x & 0x00ff00ffu) << 8);
    return (x >> 16) | (x << 16);
}
inline unsigned long long __brevll(unsigned long long x) {
    return ((unsigned long long)__brev((unsigned)x) << 32) | __brev((unsigned)(x >> 32));
}
inline int __mulhi(int x, int y) { return (int)(((long long)x * (long long)y) >> 32); }
inline unsigned int __umulhi(unsigned int x, unsigned int y) {
    return (unsigned int)(((unsigned long long)x * y) >> 32);
}
inline long long __mul64hi(long long x, long long y) {
    return (long long)(((__int128)x * (__int128)y) >> 64);
}
inline unsigned long long __umul64hi(unsigned long long x, unsigned long long y) {
    return (unsigned long long)(((unsigned __int128)x * y) >> 64);
}
inline int __mul24(int x, int y) {
    long long a = (long long)((x & 0xffffff) ^ 0x800000) - 0x800000;
    long long b = (long long)((y & 0xffffff) ^ 0x800000) - 0x800000;
    return (int)(unsigned int)(unsigned long long)(a * b);  // low 32 bits of the product
}
inline unsigned int __umul24(unsigned int x, unsigned int y) {
    return (x & 0xffffffu) * (y & 0xffffffu);
}
inline unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
    unsigned long long v = ((unsigned long long)y << 32) | x;
    unsigned int r = 0;
    for (int i = 0; i < 4; ++i) {
        unsigned sel = (s >> (4 * i)) & 7u;
        r |= (unsigned int)((v >> (8 * sel)) & 0xffu) << (8 * i);
    }
    return r;
}
inline unsigned int __funnelshift_l(unsigned int lo, unsigned int hi, unsigned int shift) {
    unsigned long long v = ((unsigned long long)hi << 32) | lo;
    return (unsigned int)((v << (shift & 31u)) >> 32);
}
inline unsigned int __funnelshift_r(unsigned int lo, unsigned int hi, unsigned int shift) {
    unsigned long long v = ((unsigned long long)hi << 32) | lo;
    return (unsigned int)(v >> (shift & 31u));
}
// Two-way dot products of the 16-bit halves of a with bytes 0 and 1 of b (the _lo forms),
// plus c: unsigned halves and bytes, or signed ones.
inline unsigned int __dp2a_lo(unsigned int a, unsigned int b, unsigned int c) {
    return c + (a & 0xffffu) * (b & 0xffu) + (a >> 16) * ((b >> 8) & 0xffu);
}
inline int __dp2a_lo(int a, int b, int c) {
    const unsigned ua = (unsigned)a, ub = (unsigned)b;
    const long long s = (long long)(short)(ua & 0xffffu) * (signed char)(ub & 0xffu) +
                        (long long)(short)(ua >> 16) * (signed char)((ub >> 8) & 0xffu);
    return (int)(unsigned int)((unsigned long long)(long long)c + (unsigned long long)s);
}
inline unsigned int __sad(int x, int y, unsigned int z) {
    return z + (unsigned int)(x > y ? (long long)x - y : (long long)y - x);
}
inline unsigned int __usad(unsigned int x, unsigned int y, unsigned int z) {
    return z + (x > y ? x - y : y - x);
}
inline int __hadd(int x, int y) { return (int)(((long long)x + y) >> 1); }
inline int __rhadd(int x, int y) { return (int)(((long long)x + y + 1) >> 1); }
inline unsigned int __uhadd(unsigned int x, unsigned int y) {
    return (unsigned int)(((unsigned long long)x + y) >> 1);
}
inline unsigned int __urhadd(unsigned int x, unsigned int y) {
    return (unsigned int)(((unsigned long long)x + y + 1) >> 1);
}

// --- CUDA's global min/max -----------------------------------------------------------------
#define CUPYPREP_EMU_MINMAX(A, B, R)                                                        \
    inline R min(A a, B b) { return (R)a < (R)b ? (R)a : (R)b; }                           \
    inline R max(A a, B b) { return (R)a > (R)b ? (R)a : (R)b; }
CUPYPREP_EMU_MINMAX(int, int, int)
CUPYPREP_EMU_MINMAX(unsigned int, unsigned int, unsigned int)
CUPYPREP_EMU_MINMAX(int, unsigned int, unsigned int)
CUPYPREP_EMU_MINMAX(unsigned int, int, unsigned int)
CUPYPREP_EMU_MINMAX(long, long, long)
CUPYPREP_EMU_MINMAX(unsigned long, unsigned long, unsigned long)
CUPYPREP_EMU_MINMAX(long long, long long, long long)
CUPYPREP_EMU_MINMAX(unsigned long long, unsigned long long, unsigned long long)
CUPYPREP_EMU_MINMAX(long long, unsigned long long, unsigned long long)
CUPYPREP_EMU_MINMAX(unsigned long long, long long, unsigned long long)
#undef CUPYPREP_EMU_MINMAX
inline unsigned int umin(unsigned int a, unsigned int b) { return a < b ? a : b; }
inline unsigned int umax(unsigned int a, unsigned int b) { return a > b ? a : b; }
inline long long llmin(long long a, long long b) { return a < b ? a : b; }
inline long long llmax(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long ullmin(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long ullmax(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
inline double min(float a, double b) { return fmin((double)a, b); }
inline double max(float a, double b) { return fmax((double)a, b); }
inline double min(double a, float b) { return fmin(a, (double)b); }
inline double max(double a, float b) { return fmax(a, (double)b); }

// --- float conversions with explicit rounding ---------------------------------------------
// The hardware clamps out-of-range values to the destination range and turns NaN into 0.
namespace cupyprep_emu {
template <typename I, typename F> inline I clamp_to(F r) {
    if (r != r) return 0;
    if (r <= (F)std::numeric_limits<I>::min()) return std::numeric_limits<I>::min();
    if (r >= (F)std::numeric_limits<I>::max()) return std::numeric_limits<I>::max();
    return (I)r;
}
}  // namespace cupyprep_emu
inline int __float2int_rn(float x) { return cupyprep_emu::clamp_to<int>(nearbyintf(x)); }
inline int __float2int_rd(float x) { return cupyprep_emu::clamp_to<int>(floorf(x)); }
inline int __float2int_ru(float x) { return cupyprep_emu::clamp_to<int>(ceilf(x)); }
inline int __float2int_rz(float x) { return cupyprep_emu::clamp_to<int>(truncf(x)); }
inline unsigned int __float2uint_rn(float x) { return cupyprep_emu::clamp_to<unsigned int>(nearbyintf(x)); }
inline unsigned int __float2uint_rd(float x) { return cupyprep_emu::clamp_to<unsigned int>(floorf(x)); }
inline unsigned int __float2uint_ru(float x) { return cupyprep_emu::clamp_to<unsigned int>(ceilf(x)); }
inline unsigned int __float2uint_rz(float x) { return cupyprep_emu::clamp_to<unsigned int>(truncf(x)); }
inline long long __float2ll_rn(float x) { return cupyprep_emu::clamp_to<long long>(nearbyintf(x)); }
inline long long __float2ll_rd(float x) { return cupyprep_emu::clamp_to<long long>(floorf(x)); }
inline long long __float2ll_ru(float x) { return cupyprep_emu::clamp_to<long long>(ceilf(x)); }
inline long long __float2ll_rz(float x) { return cupyprep_emu::clamp_to<long long>(truncf(x)); }
inline int __double2int_rn(double x) { return cupyprep_emu::clamp_to<int>(nearbyint(x)); }
inline int __double2int_rd(double x) { return cupyprep_emu::clamp_to<int>(floor(x)); }
inline int __double2int_ru(double x) { return cupyprep_emu::clamp_to<int>(ceil(x)); }
inline int __double2int_rz(double x) { return cupyprep_emu::clamp_to<int>(trunc(x)); }
inline unsigned int __double2uint_rn(double x) { return cupyprep_emu::clamp_to<unsigned int>(nearbyint(x)); }
inline unsigned int __double2uint_rd(double x) { return cupyprep_emu::clamp_to<unsigned int>(floor(x)); }
inline unsigned int __double2uint_rz(double x) { return cupyprep_emu::clamp_to<unsigned int>(trunc(x)); }
inline long long __double2ll_rn(double x) { return cupyprep_emu::clamp_to<long long>(nearbyint(x)); }
inline long long __double2ll_rd(double x) { return cupyprep_emu::clamp_to<long long>(floor(x)); }
inline long long __double2ll_ru(double x) { return cupyprep_emu::clamp_to<long long>(ceil(x)); }
inline long long __double2ll_rz(double x) { return cupyprep_emu::clamp_to<long long>(trunc(x)); }
inline float __double2float_rn(double x) { return (float)x; }
inline float __int2float_rn(int x) { return (float)x; }
inline float __uint2float_rn(unsigned int x) { return (float)x; }
inline float __ll2float_rn(long long x) { return (float)x; }
inline float __ull2float_rn(unsigned long long x) { return (float)x; }
inline double __int2double_rn(int x) { return (double)x; }
inline double __uint2double_rn(unsigned int x) { return (double)x; }
inline double __ll2double_rn(long long x) { return (double)x; }

inline float __int_as_float(int x) { return cupyprep_emu::bit_cast<float>(x); }
inline int __float_as_int(float x) { return cupyprep_emu::bit_cast<int>(x); }
inline float __uint_as_float(unsigned int x) { return cupyprep_emu::bit_cast<float>(x); }
inline unsigned int __float_as_uint(float x) { return cupyprep_emu::bit_cast<unsigned int>(x); }
inline double __longlong_as_double(long long x) { return cupyprep_emu::bit_cast<double>(x); }
inline long long __double_as_longlong(double x) { return cupyprep_emu::bit_cast<long long>(x); }

// --- float arithmetic intrinsics -----------------------------------------------------------
// Round-to-nearest forms are plain IEEE operations (the build uses -ffp-contract=off, so
// nothing is fused behind their back). The fast approximate forms (__expf, __fdividef...)
// are computed with the accurate library functions: the emulator does not reproduce the
// GPU's approximation error.
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
// Round toward zero: the nearest sum, stepped one float toward zero where it was rounded
// away from zero (TwoSum gives the sum's exact rounding error).
inline float __fadd_rz(float a, float b) {
    const float s = a + b;
    if (std::isinf(s) && std::isfinite(a) && std::isfinite(b))
        return std::copysign(std::numeric_limits<float>::max(), s);
    if (!std::isfinite(s)) return s;
    const float bb = s - a;
    const float e = (a - (s - bb)) + (b - bb);
    return e != 0.0f && (e > 0.0f) != (s > 0.0f) ? std::nextafter(s, 0.0f) : s;
}
// Round down (toward minus infinity): the nearest sum, stepped one float down where it was
// rounded up. An overflow toward plus infinity stops at the largest float.
inline float __fadd_rd(float a, float b) {
    const float s = a + b;
    if (std::isinf(s) && std::isfinite(a) && std::isfinite(b))
        return s > 0.0f ? std::numeric_limits<float>::max() : s;
    if (!std::isfinite(s)) return s;
    if (s == 0.0f)  // an exact zero: -0 unless both are +0
        return a == 0.0f && b == 0.0f && !std::signbit(a) && !std::signbit(b) ? 0.0f : -0.0f;
    const float bb = s - a;
    const float e = (a - (s - bb)) + (b - bb);
    return e < 0.0f ? std::nextafter(s, -INFINITY) : s;
}
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float __frsqrt_rn(float a) { return 1.0f / sqrtf(a); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
inline double __dsqrt_rn(double a) { return sqrt(a); }
inline double __drcp_rn(double a) { return 1.0 / a; }
inline float __saturatef(float x) { return x >= 1.0f ? 1.0f : (x > 0.0f ? x : 0.0f); }
inline float __fdividef(float a, float b) { return a / b; }
inline float fdividef(float a, float b) { return a / b; }
inline double fdivide(double a, double b) { return a / b; }
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return exp10f(x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log10f(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline void __sincosf(float x, float* s, float* c) { *s = sinf(x); *c = cosf(x); }

// --- math-library names CUDA adds to the C library's --------------------------------------
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
inline double rcbrt(double x) { return 1.0 / cbrt(x); }
inline float sinpif(float x) { return (float)sin(M_PI * (double)x); }
inline float cospif(float x) { return (float)cos(M_PI * (double)x); }
inline void sincospif(float x, float* s, float* c) { *s = sinpif(x); *c = cospif(x); }
inline double sinpi(double x) { return sin(M_PI * x); }
inline double cospi(double x) { return cos(M_PI * x); }
inline float normf(int n, const float* a) {
    double s = 0;
    for (int i = 0; i < n; ++i) s += (double)a[i] * a[i];
    return (float)sqrt(s);
}

// --- loads and stores with cache hints: plain accesses here ---------------------------------
template <typename T> inline T __ldg(const T* p) { return *p; }
template <typename T> inline T __ldcg(const T* p) { return *p; }
template <typename T> inline T __ldca(const T* p) { return *p; }
template <typename T> inline T __ldcs(const T* p) { return *p; }
template <typename T> inline T __ldlu(const T* p) { return *p; }
template <typename T> inline T __ldcv(const T* p) { return *p; }
template <typename T> inline void __stwb(T* p, T v) { *p = v; }
template <typename T> inline void __stcg(T* p, T v) { *p = v; }
template <typename T> inline void __stcs(T* p, T v) { *p = v; }
template <typename T> inline void __stwt(T* p, T v) { *p = v; }

[[noreturn]] inline void __trap() { cupyprep_emu::fail("__trap() called"); }

// --- float16 conversions used by common.cuh ----------------------------------------------
inline unsigned short cupyprep_f32_to_f16_bits(float f) {
    _Float16 h = (_Float16)f;  // round to nearest even
    return cupyprep_emu::bit_cast<unsigned short>(h);
}
inline float cupyprep_f16_bits_to_f32(unsigned short bits) {
    return (float)cupyprep_emu::bit_cast<_Float16>(bits);
}

// --- CUDA features the emulator does not model ------------------------------------------------
// Deleted, so a use fails to compile with the feature's name in the message.
#define CUPYPREP_EMU_UNSUPPORTED(NAME) template <typename... A> void NAME(A...) = delete;
CUPYPREP_EMU_UNSUPPORTED(__shfl)
CUPYPREP_EMU_UNSUPPORTED(__shfl_up)
CUPYPREP_EMU_UNSUPPORTED(__shfl_down)
CUPYPREP_EMU_UNSUPPORTED(__shfl_xor)
CUPYPREP_EMU_UNSUPPORTED(__ballot)
CUPYPREP_EMU_UNSUPPORTED(__any)
CUPYPREP_EMU_UNSUPPORTED(__all)
CUPYPREP_EMU_UNSUPPORTED(__match_any_sync)
CUPYPREP_EMU_UNSUPPORTED(__match_all_sync)
CUPYPREP_EMU_UNSUPPORTED(__reduce_add_sync)
CUPYPREP_EMU_UNSUPPORTED(__reduce_min_sync)
CUPYPREP_EMU_UNSUPPORTED(__reduce_max_sync)
CUPYPREP_EMU_UNSUPPORTED(__reduce_and_sync)
CUPYPREP_EMU_UNSUPPORTED(__reduce_or_sync)
CUPYPREP_EMU_UNSUPPORTED(__reduce_xor_sync)
CUPYPREP_EMU_UNSUPPORTED(clock64)
CUPYPREP_EMU_UNSUPPORTED(__nanosleep)
CUPYPREP_EMU_UNSUPPORTED(__brkpt)
CUPYPREP_EMU_UNSUPPORTED(__prof_trigger)
CUPYPREP_EMU_UNSUPPORTED(tex1Dfetch)
CUPYPREP_EMU_UNSUPPORTED(tex1D)
CUPYPREP_EMU_UNSUPPORTED(tex2D)
CUPYPREP_EMU_UNSUPPORTED(tex3D)
CUPYPREP_EMU_UNSUPPORTED(surf1Dread)
CUPYPREP_EMU_UNSUPPORTED(surf2Dread)
CUPYPREP_EMU_UNSUPPORTED(surf3Dread)
CUPYPREP_EMU_UNSUPPORTED(surf1Dwrite)
CUPYPREP_EMU_UNSUPPORTED(surf2Dwrite)
CUPYPREP_EMU_UNSUPPORTED(surf3Dwrite)
CUPYPREP_EMU_UNSUPPORTED(__isGlobal)
CUPYPREP_EMU_UNSUPPORTED(__isShared)
CUPYPREP_EMU_UNSUPPORTED(__cvta_generic_to_shared)
#undef CUPYPREP_EMU_UNSUPPORTED
