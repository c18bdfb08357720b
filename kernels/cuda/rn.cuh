// Correctly rounded float and double arithmetic for device code.
#pragma once

#include <cuda_runtime.h>

namespace tcv::kernels::cuda {

// IEEE operations rounded once each, which nvcc never contracts into FMAs:
// kernels that must give the CPU's values bit for bit (optimizer steps, box
// arithmetic, the heatmap filter) spell each operation with these.
#define TCV_CUDA_RN_BINARY(name, f32_op, f64_op)               \
  __device__ __forceinline__ float name(float a, float b) {    \
    return f32_op(a, b);                                       \
  }                                                            \
  __device__ __forceinline__ double name(double a, double b) { \
    return f64_op(a, b);                                       \
  }
TCV_CUDA_RN_BINARY(add_rn, __fadd_rn, __dadd_rn)
TCV_CUDA_RN_BINARY(sub_rn, __fsub_rn, __dsub_rn)
TCV_CUDA_RN_BINARY(mul_rn, __fmul_rn, __dmul_rn)
TCV_CUDA_RN_BINARY(div_rn, __fdiv_rn, __ddiv_rn)
#undef TCV_CUDA_RN_BINARY

__device__ __forceinline__ float sqrt_rn(float a) {
  return __fsqrt_rn(a);
}
__device__ __forceinline__ double sqrt_rn(double a) {
  return __dsqrt_rn(a);
}

}  // namespace tcv::kernels::cuda
