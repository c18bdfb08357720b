// What every CUDA kernel file of tcv shares: error checks, the device types of
// tcv's dtypes with their dispatch macros, conversions, strided indexing and
// launch helpers. Included only from .cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/base.h"
#include "kernels/cuda/runtime.h"
#include "kernels/pointwise.h"

#define TCV_CUDA_CHECK(call)                                                                      \
  do {                                                                                            \
    const cudaError_t err_ = (call);                                                              \
    TCV_CHECK(err_ == cudaSuccess, "[cuda] ", #call, " failed: ", cudaGetErrorString(err_), " (", \
              __FILE__, ":", __LINE__, ")");                                                      \
  } while (0)

/// After every launch: reports a bad configuration at the launch site.
#define TCV_CUDA_LAUNCH_CHECK() TCV_CUDA_CHECK(cudaGetLastError())

namespace tcv::kernels::cuda {

using half = __half;
using bf16 = __nv_bfloat16;

/// The stream the engine's kernels run on (the current device's compute stream).
inline cudaStream_t cur_stream() {
  return static_cast<cudaStream_t>(compute_stream());
}

/// Accumulation type: float for the 16-bit floats, the type itself otherwise.
template <typename T>
struct Acc {
  using type = T;
};
template <>
struct Acc<half> {
  using type = float;
};
template <>
struct Acc<bf16> {
  using type = float;
};
template <typename T>
using acc_t = typename Acc<T>::type;

/// Conversion between any two element types, through float for the 16-bit ones.
template <typename To, typename From>
__host__ __device__ __forceinline__ To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<From, half>) {
    return convert<To>(__half2float(v));
  } else if constexpr (std::is_same_v<From, bf16>) {
    return convert<To>(__bfloat162float(v));
  } else if constexpr (std::is_same_v<To, half>) {
    return __float2half(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bf16>) {
    return __float2bfloat16(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else {
    return static_cast<To>(v);
  }
}

template <typename T>
__host__ __device__ __forceinline__ acc_t<T> to_acc(T v) {
  return convert<acc_t<T>>(v);
}

/// The CUDA math library for the shared elementwise formulas (kernels/pointwise.h).
struct DeviceMath {
#define TCV_DEVICE_MATH(name, fn)                          \
  template <typename F>                                    \
  __host__ __device__ __forceinline__ static F name(F x) { \
    return fn(x);                                          \
  }
  TCV_DEVICE_MATH(exp, ::exp)
  TCV_DEVICE_MATH(log, ::log)
  TCV_DEVICE_MATH(sqrt, ::sqrt)
  TCV_DEVICE_MATH(tanh, ::tanh)
  TCV_DEVICE_MATH(abs, ::fabs)
#undef TCV_DEVICE_MATH
  template <typename F>
  __host__ __device__ __forceinline__ static F sigmoid(F x) {
    return F(1) / (F(1) + ::exp(-x));
  }
  /// max(z, 0) + log1p(exp(−|z|)): no overflow for large |z|.
  template <typename F>
  __host__ __device__ __forceinline__ static F softplus(F z) {
    return (z > F(0) ? z : F(0)) + ::log1p(::exp(-::fabs(z)));
  }
  template <typename F>
  __host__ __device__ __forceinline__ static F pow(F x, F y) {
    return ::pow(x, y);
  }
};

/// Up to kMaxDims sizes and strides, passed to kernels by value.
struct Indexer {
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};

  Indexer() = default;
  explicit Indexer(const KTensor& t) : ndim(t.ndim) {
    for (int i = 0; i < ndim; ++i) {
      sizes[i] = t.sizes[i];
      strides[i] = t.strides[i];
    }
  }
  /// Element offset of the row-major linear index `i` over `sizes`.
  __device__ __forceinline__ int64_t offset(int64_t i) const {
    int64_t off = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t s = sizes[d];
      const int64_t q = i / s;
      off += (i - q * s) * strides[d];
      i = q;
    }
    return off;
  }
};

/// Merges adjacent dims that are contiguous with each other in every operand
/// (all operands share the sizes of ops[0]), dropping size-1 dims: fewer
/// divisions per element. Rewrites the operands in place.
inline void coalesce(KTensor* ops, int n) {
  KTensor& first = ops[0];
  int nd = 0;
  int64_t sizes[kMaxDims];
  int64_t strides[8][kMaxDims];
  for (int d = 0; d < first.ndim; ++d) {
    if (first.sizes[d] == 1) continue;
    // The previous kept (outer) dim folds into this one when, in every operand,
    // its stride equals this dim's stride times this dim's size.
    bool merge = nd > 0;
    for (int k = 0; k < n && merge; ++k)
      merge = strides[k][nd - 1] == ops[k].strides[d] * first.sizes[d];
    if (merge) {
      for (int k = 0; k < n; ++k) strides[k][nd - 1] = ops[k].strides[d];
      sizes[nd - 1] *= first.sizes[d];
    } else {
      for (int k = 0; k < n; ++k) strides[k][nd] = ops[k].strides[d];
      sizes[nd] = first.sizes[d];
      ++nd;
    }
  }
  for (int k = 0; k < n; ++k) {
    ops[k].ndim = nd;
    for (int d = 0; d < nd; ++d) {
      ops[k].sizes[d] = sizes[d];
      ops[k].strides[d] = strides[k][d];
    }
  }
}

/// Streaming multiprocessors of the first device asked (80 if unknown).
inline int num_sms() {
  static int sms = [] {
    int dev = 0, count = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, dev);
    return count > 0 ? count : 80;
  }();
  return sms;
}

/// Blocks for a grid-stride loop over n items: enough to fill the device, no more.
inline int grid_for(int64_t n, int threads = 256) {
  const int64_t want = (n + threads - 1) / threads;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(want, int64_t(num_sms()) * 16)));
}

/// V consecutive elements, loaded and stored as one vector access.
template <typename T, int V>
struct alignas(sizeof(T) * V) Lanes {
  T v[V];
};
/// Whether p may be read and written as Lanes<T, V>.
template <int V, typename T>
bool lanes_aligned(const T* p) {
  return reinterpret_cast<uintptr_t>(p) % alignof(Lanes<T, V>) == 0;
}
template <int V, typename T>
__device__ __forceinline__ Lanes<T, V> load_lanes(const T* p) {
  return *reinterpret_cast<const Lanes<T, V>*>(p);
}
template <int V, typename T>
__device__ __forceinline__ void store_lanes(T* p, const Lanes<T, V>& v) {
  *reinterpret_cast<Lanes<T, V>*>(p) = v;
}

#define TCV_CUDA_GRID_STRIDE(i, n)                                                       \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

}  // namespace tcv::kernels::cuda

// Dispatch on a tcv dtype with scalar_t bound to the device type
// (float, double, __half, __nv_bfloat16, int32_t, int64_t, uint8_t, bool).
#define TCV_CUDA_DISPATCH_FLOAT(dt, op, ...)                                     \
  switch (dt) {                                                                  \
    TCV_DTYPE_CASE(f32, float, __VA_ARGS__)                                      \
    TCV_DTYPE_CASE(f64, double, __VA_ARGS__)                                     \
    TCV_DTYPE_CASE(f16, ::tcv::kernels::cuda::half, __VA_ARGS__)                 \
    TCV_DTYPE_CASE(bf16, ::tcv::kernels::cuda::bf16, __VA_ARGS__)                \
    default:                                                                     \
      TCV_THROW("[", op, "] not implemented for dtype ", ::tcv::dtype_name(dt)); \
  }

#define TCV_CUDA_DISPATCH_ALL(dt, op, ...)                        \
  switch (dt) {                                                   \
    TCV_DTYPE_CASE(f32, float, __VA_ARGS__)                       \
    TCV_DTYPE_CASE(f64, double, __VA_ARGS__)                      \
    TCV_DTYPE_CASE(f16, ::tcv::kernels::cuda::half, __VA_ARGS__)  \
    TCV_DTYPE_CASE(bf16, ::tcv::kernels::cuda::bf16, __VA_ARGS__) \
    TCV_DTYPE_CASE(i32, int32_t, __VA_ARGS__)                     \
    TCV_DTYPE_CASE(i64, int64_t, __VA_ARGS__)                     \
    TCV_DTYPE_CASE(u8, uint8_t, __VA_ARGS__)                      \
    TCV_DTYPE_CASE(b8, bool, __VA_ARGS__)                         \
  }
