// Host data put into device memory by kernel launches that carry it as a parameter.
//
// A CUDA graph cannot capture a copy from pageable host memory, but it keeps the
// parameters of every kernel launch it captures. So, under capture, a call's small host
// tables (a list's image records past the ones kernels take by value, a batch of host
// matrices, host priors) go into the graph as launches of cupyprep_put_words, each
// carrying up to kPutWords 32-bit words of the table (_arrays.upload): every replay
// writes the values of the capture again, as a matrix passed by value is replayed.
#include "common.cuh"

// Words a launch carries: its parameters stay within 4 KB (_arrays._PUT_WORDS).
constexpr int kPutWords = 1000;

// dst[i] = words.v[i] for i < count (count <= kPutWords), a grid-stride loop (launch_1d).
__global__ void cupyprep_put_words(unsigned* __restrict__ dst,
                                   const __grid_constant__ cp::ByValue<unsigned, kPutWords> words,
                                   int count) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += blockDim.x * gridDim.x)
        dst[i] = words.v[i];
}
