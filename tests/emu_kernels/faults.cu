// Toy kernels with planted bugs the emulator must report.

// mode 0: reads one element past the end of `in`; mode 1: writes one past the end of `out`.
__global__ void off_by_one(const float* in, float* out, int n, int mode) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (mode == 0) out[i] = in[i + 1];
    else out[i + 1] = in[i];
}

// mode 0: signed overflow; mode 1: misaligned int load.
__global__ void undefined(const unsigned char* bytes, int* out, int big, int mode) {
    if (mode == 0) out[0] = big + (int)threadIdx.x + 1;
    else out[0] = *reinterpret_cast<const int*>(bytes + 1);
}

// Shared-memory overrun: one past the end of a __shared__ array through a pointer.
__global__ void shared_overrun(float* out, int k) {
    __shared__ float tile[32];
    float* p = tile;
    p[threadIdx.x + k] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = tile[threadIdx.x];
}

// Even lanes wait in a warp collective while odd lanes wait at the block barrier.
__global__ void divergent_barrier(int* out) {
    if (threadIdx.x & 1) __syncthreads();
    else __syncwarp();
    out[threadIdx.x] = 1;
}
