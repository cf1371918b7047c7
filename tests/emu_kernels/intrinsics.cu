// Calls the built-ins of the emulator's CUDA header; one result per slot of `out`.

static_assert(sizeof(float4) == 16 && alignof(float4) == 16, "float4");
static_assert(sizeof(float2) == 8 && alignof(float2) == 8, "float2");
static_assert(sizeof(float3) == 12 && alignof(float3) == 4, "float3");
static_assert(sizeof(uchar4) == 4 && alignof(uchar4) == 4, "uchar4");
static_assert(sizeof(uchar3) == 3 && alignof(uchar3) == 1, "uchar3");
static_assert(alignof(int2) == 8 && alignof(int4) == 16 && alignof(double2) == 16, "align");
static_assert(alignof(short2) == 4 && alignof(ushort4) == 8 && alignof(longlong2) == 16, "align");

__global__ void intrinsics(const float* f, long long* out, float* fout, double* dout) {
    int k = 0;
    // rounding conversions: f = {2.5, -2.5, 3.5, -0.5, 1e10, nan, 0.7, -1.7}
    out[k++] = __float2int_rn(f[0]);
    out[k++] = __float2int_rn(f[1]);
    out[k++] = __float2int_rn(f[2]);
    out[k++] = __float2int_rd(f[3]);
    out[k++] = __float2int_ru(f[3]);
    out[k++] = __float2int_rz(f[7]);
    out[k++] = __float2int_rn(f[4]);
    out[k++] = __float2int_rn(f[5]);
    out[k++] = __float2uint_rn(f[1]);
    out[k++] = __float2uint_rd(f[6]);
    out[k++] = __float2uint_rz(f[4]);
    out[k++] = __double2int_rn((double)f[0]);
    out[k++] = __double2int_rd((double)f[7]);
    out[k++] = __double2int_rz((double)f[7]);
    out[k++] = __double2ll_rd((double)f[4] * 1000.0);
    out[k++] = __float2ll_rd(f[7]);
    // bits
    out[k++] = __popc(0xf0f0u);
    out[k++] = __popcll(0xffffffffffull);
    out[k++] = __ffs(0);
    out[k++] = __ffs(0x50);
    out[k++] = __ffsll(1ll << 40);
    out[k++] = __clz(0);
    out[k++] = __clz(1);
    out[k++] = __clzll(1);
    out[k++] = __brev(1u);
    out[k++] = __float_as_int(1.0f);
    out[k++] = __float_as_uint(-0.0f);
    out[k++] = __umulhi(0xffffffffu, 0xffffffffu);
    out[k++] = __mul24(-3, 5);
    out[k++] = __byte_perm(0x33221100u, 0x77665544u, 0x5140u);
    // CUDA's min/max
    out[k++] = min(3, -4);
    out[k++] = max(3u, 7u);
    out[k++] = min(-1ll, 2ll);
    out[k++] = max(5ull, 9ull);
    // atomics
    int ai = 5;
    unsigned au = 5;
    unsigned long long aull = 5;
    long long all = -5;
    unsigned short ash = 7;
    out[k++] = atomicAdd(&ai, 3) * 100 + ai;
    out[k++] = atomicSub(&au, 2u) * 100 + au;
    out[k++] = atomicMax(&all, 4ll) * 100 + all;
    out[k++] = atomicMin(&aull, 2ull) * 100 + aull;
    out[k++] = atomicCAS(&ai, 8, 1) * 100 + ai;
    out[k++] = atomicCAS(&ash, (unsigned short)7, (unsigned short)9) * 100 + ash;
    out[k++] = atomicExch(&au, 11u) * 100 + au;
    out[k++] = atomicOr(&ai, 6) * 100 + ai;
    out[k++] = atomicAnd(&ai, 3) * 100 + ai;
    out[k++] = atomicXor(&ai, 1) * 100 + ai;
    au = 3;
    out[k++] = atomicInc(&au, 3u) * 100 + au;
    out[k++] = atomicInc(&au, 3u) * 100 + au;
    float af = 1.5f;
    double ad = 2.25;
    fout[0] = atomicAdd(&af, 1.0f) + 10.0f * af;
    dout[0] = atomicAdd(&ad, 0.5) + 10.0 * ad;
    // float math
    fout[1] = __fmaf_rn(f[6], 3.0f, 1.0f);
    fout[2] = __fmul_rn(f[6], 3.0f);
    fout[3] = __saturatef(f[0]) + __saturatef(f[1]) + __saturatef(f[6]);
    fout[4] = rsqrtf(4.0f);
    fout[5] = fminf(f[0], f[1]) + fmaxf(f[0], f[1]);
    float s, c;
    sincosf(0.0f, &s, &c);
    fout[6] = s + c + floorf(f[7]) + ceilf(f[7]) + truncf(f[7]) + rintf(f[0]) + roundf(f[0]);
    fout[7] = (isnan(f[5]) ? 1.0f : 0.0f) + (isinf(f[5]) ? 2.0f : 0.0f) +
              (isfinite(f[6]) ? 4.0f : 0.0f);
    dout[1] = __dmul_rn(0.1, 3.0) + __dadd_rn(0.1, 0.2) + floor(-1.5) + fmin(1.0, 2.0);
    float4 v = make_float4(1.f, 2.f, 3.f, 4.f);
    uchar4 u = make_uchar4(1, 2, 3, 250);
    int2 i2 = make_int2(-1, 7);
    fout[8] = v.x + v.y + v.z + v.w + u.w + (float)(i2.x + i2.y);
    out[k++] = k;  // the slot count, checked by the test
}

// __fadd_rz and __fadd_rd, element by element (the directed-rounding intrinsics the
// emulator has).
__global__ void fadd_rz(const float* a, const float* b, float* out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __fadd_rz(a[i], b[i]);
}

__global__ void fadd_rd(const float* a, const float* b, float* out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __fadd_rd(a[i], b[i]);
}
