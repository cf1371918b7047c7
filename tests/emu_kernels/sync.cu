// Toy kernels using barriers, shared memory, atomics and warp collectives.

// One partial sum per block: tree reduction in shared memory.
template <int BLOCK>
__global__ void block_sum(const float* in, float* partial, int n) {
    __shared__ float tile[BLOCK];
    int i = blockIdx.x * BLOCK + threadIdx.x;
    tile[threadIdx.x] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) tile[threadIdx.x] += tile[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = tile[0];
}

__global__ void histogram(const unsigned char* in, unsigned int* bins, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&bins[in[i]], 1u);
}

// Per warp: the sum of its lanes' values (shfl_down tree), the ballot of odd values,
// a butterfly max (shfl_xor), and an inclusive scan (shfl_up). `exit_lane` >= 0 makes
// that lane return before the collectives (a bug the emulator must report).
__global__ void warp_ops(const int* in, int* sums, unsigned int* ballots, int* maxes, int* scans,
                         int exit_lane) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x & 31;
    if (lane == exit_lane) return;
    int v = in[i];
    unsigned int odd = __ballot_sync(0xffffffffu, v & 1);
    int s = v;
    for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
    int m = v;
    for (int off = 16; off > 0; off >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, off));
    int scan = v;
    for (int off = 1; off < 32; off <<= 1) {
        int t = __shfl_up_sync(0xffffffffu, scan, off);
        if (lane >= off) scan += t;
    }
    int first = __shfl_sync(0xffffffffu, v, 0);
    scans[i] = scan;
    if (lane == 0) {
        sums[i / 32] = s;
        ballots[i / 32] = odd;
        maxes[i / 32] = m + 0 * first;
    }
}

// __syncthreads_count / __any_sync / __all_sync.
__global__ void votes(const int* in, int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int c = __syncthreads_count(in[i] > 0);
    int any = __any_sync(0xffffffffu, in[i] > 0);
    int all = __all_sync(0xffffffffu, in[i] > 0);
    out[3 * i + 0] = c;
    out[3 * i + 1] = any;
    out[3 * i + 2] = all;
}
