// Header inlined into routed.cu by cupyprep._kernels.read_source.
#pragma once

namespace emu_test {

__device__ __forceinline__ float plus_one(float v) { return v + 1.0f; }

}  // namespace emu_test
