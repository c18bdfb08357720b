// Unsigned keys whose integer order is the CPU's order of floating-point
// values, for radix sorts (kernels/cuda/sort.cu, NMS in kernels/cuda/boxes.cu):
// every NaN the largest (and equal to each other), -0.0 equal to 0.0, then the
// usual sign flip.
#pragma once

#include <cstdint>

namespace tcv::kernels::cuda {

__device__ __forceinline__ uint32_t sort_key(float f) {
  if (f != f) return 0xffffffffu;
  if (f == 0.0f) f = 0.0f;
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ uint64_t sort_key(double f) {
  if (f != f) return ~0ull;
  if (f == 0.0) f = 0.0;
  const uint64_t u = static_cast<uint64_t>(__double_as_longlong(f));
  return (u & 0x8000000000000000ull) ? ~u : (u | 0x8000000000000000ull);
}

}  // namespace tcv::kernels::cuda
