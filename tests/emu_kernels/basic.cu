// Toy kernels for the emulator's own tests.

template <typename T>
__global__ void vector_add(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                           int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = a[i] + b[i];
}

// Writes each thread's coordinates into out[global linear id * 6 ...].
__global__ void coords(unsigned int* out) {
    unsigned int bx = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned int tx = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned int id = bx * (blockDim.x * blockDim.y * blockDim.z) + tx;
    unsigned int* o = out + 6 * (size_t)id;
    o[0] = threadIdx.x;
    o[1] = threadIdx.y;
    o[2] = threadIdx.z;
    o[3] = blockIdx.x;
    o[4] = blockIdx.y;
    o[5] = blockIdx.z;
}

// Multiplies n elements spaced `stride` elements apart (negative strides too).
__global__ void scale_strided(float* x, long long stride, int n, float s) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i * stride] *= s;
}

// out[k] = sum of rows[k][0 .. lens[k]) for a ragged batch of rows.
__global__ void row_sums(const float* const* rows, const int* lens, float* out, int count) {
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= count) return;
    const float* r = rows[k];
    float s = 0.0f;
    for (int j = 0; j < lens[k]; ++j) s += r[j];
    out[k] = s;
}

// Per-row records (a pointer and a length) by value, or from `table` where it is not NULL.
struct Row {
    const float* p;
    int n;
    int pad;
};
struct Rows {
    Row v[4];
};
extern "C" __global__ void record_sums(const Row* table, const __grid_constant__ Rows small,
                                       float* out, int count) {
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= count) return;
    const Row r = table ? table[k] : small.v[k];
    float s = 0.0f;
    for (int j = 0; j < r.n; ++j) s += r.p[j];
    out[k] = s;
}
