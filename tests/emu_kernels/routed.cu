// Launched through cupyprep._kernels.get_function inside cupyprep.testing.emulate().
#include "helpers.cuh"

__global__ void add_one(const float* in, float* out, int n, int overrun) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = emu_test::plus_one(in[i == n - 1 ? i + overrun : i]);  // line 7
}
