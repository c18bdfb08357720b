// Padding: one thread per output element maps its coordinates to the source
// (or to the constant); the backward adds dy into dx with atomics.
#include <type_traits>

#include "kernels/cuda/handles.cuh"
#include "kernels/cuda/pad.h"

namespace tcv::kernels::cuda {
namespace {

struct PadArgs {
  int nd = 0;
  int mode = 0;
  int64_t out_sizes[kMaxDims] = {};
  int64_t in_sizes[kMaxDims] = {};
  int64_t in_strides[kMaxDims] = {};
  int64_t before[kMaxDims] = {};
};

PadArgs make_args(PadMode mode, const KTensor& out, const KTensor& in, const int64_t* before) {
  PadArgs a;
  a.nd = out.ndim;
  a.mode = static_cast<int>(mode);
  int64_t s = 1;
  for (int d = a.nd - 1; d >= 0; --d) {
    a.out_sizes[d] = out.sizes[d];
    a.in_sizes[d] = in.sizes[d];
    a.in_strides[d] = s;  // contiguous
    a.before[d] = before[d];
    s *= in.sizes[d];
  }
  return a;
}

// Source offset of the output element at linear index i, or -1 for the constant.
__device__ __forceinline__ int64_t source(const PadArgs& a, int64_t i) {
  int64_t off = 0;
  for (int d = a.nd - 1; d >= 0; --d) {
    const int64_t c = i % a.out_sizes[d];
    i /= a.out_sizes[d];
    const int64_t n = a.in_sizes[d];
    int64_t s = c - a.before[d];
    if (s < 0 || s >= n) {
      if (a.mode == static_cast<int>(PadMode::constant)) return -1;
      if (a.mode == static_cast<int>(PadMode::reflect)) {
        if (s < 0) s = -s;
        if (s >= n) s = 2 * (n - 1) - s;
      } else {
        s = s < 0 ? 0 : n - 1;
      }
    }
    off += s * a.in_strides[d];
  }
  return off;
}

template <typename T>
__global__ void pad_fwd(PadArgs a, int64_t total, const T* in, T* out, T value) {
  TCV_CUDA_GRID_STRIDE(i, total) {
    const int64_t s = source(a, i);
    out[i] = s < 0 ? value : in[s];
  }
}

template <typename T, typename D>
__global__ void pad_bwd(PadArgs a, int64_t total, const T* dy, D* dx) {
  TCV_CUDA_GRID_STRIDE(i, total) {
    const int64_t s = source(a, i);
    if (s >= 0) atomicAdd(dx + s, static_cast<D>(to_acc(dy[i])));
  }
}

template <typename T>
__global__ void to_dtype(T* out, const float* in, int64_t n) {
  TCV_CUDA_GRID_STRIDE(i, n) out[i] = convert<T>(in[i]);
}

template <typename T>
void backward_typed(const PadArgs& a, const KTensor& dx, const KTensor& dy) {
  cudaStream_t st = cur_stream();
  const int64_t n = dx.numel(), total = dy.numel();
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    TCV_CUDA_CHECK(cudaMemsetAsync(dx.data, 0, n * sizeof(T), st));
    if (total == 0) return;
    pad_bwd<T, T><<<grid_for(total), 256, 0, st>>>(a, total, dy.ptr<const T>(), dx.ptr<T>());
    TCV_CUDA_LAUNCH_CHECK();
  } else {
    Workspace buf(n * sizeof(float));
    float* f = static_cast<float*>(buf.get());
    TCV_CUDA_CHECK(cudaMemsetAsync(f, 0, n * sizeof(float), st));
    if (total > 0) {
      pad_bwd<T, float><<<grid_for(total), 256, 0, st>>>(a, total, dy.ptr<const T>(), f);
      TCV_CUDA_LAUNCH_CHECK();
    }
    to_dtype<T><<<grid_for(n), 256, 0, st>>>(dx.ptr<T>(), f, n);
    TCV_CUDA_LAUNCH_CHECK();
  }
}

}  // namespace

void pad(PadMode mode, const KTensor& out, const KTensor& in, const int64_t* before, double value) {
  if (out.numel() == 0) return;
  const PadArgs a = make_args(mode, out, in, before);
  const int64_t total = out.numel();
  TCV_CUDA_DISPATCH_ALL(in.dtype, "pad", {
    pad_fwd<scalar_t><<<grid_for(total), 256, 0, cur_stream()>>>(
        a, total, in.ptr<const scalar_t>(), out.ptr<scalar_t>(), convert<scalar_t>(value));
  });
  TCV_CUDA_LAUNCH_CHECK();
}

void pad_backward(PadMode mode, const KTensor& dx, const KTensor& dy, const int64_t* before) {
  if (dx.numel() == 0) return;
  const PadArgs a = make_args(mode, dy, dx, before);
  switch (dy.dtype) {
    TCV_DTYPE_CASE(f32, float, backward_typed<scalar_t>(a, dx, dy))
    TCV_DTYPE_CASE(f64, double, backward_typed<scalar_t>(a, dx, dy))
    TCV_DTYPE_CASE(f16, half, backward_typed<scalar_t>(a, dx, dy))
    TCV_DTYPE_CASE(bf16, bf16, backward_typed<scalar_t>(a, dx, dy))
    default:
      TCV_THROW("[pad] backward not implemented for dtype ", dtype_name(dy.dtype));
  }
}

}  // namespace tcv::kernels::cuda
