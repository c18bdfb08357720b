// Elementwise loops on the GPU: out[i] = f(in...[i]) over tensors that share
// out's shape (inputs broadcast with stride 0). Dims are coalesced first; all
// operands contiguous takes a plain indexed loop, anything else computes each
// operand's offset from the linear index. Included only from .cu files
// compiled with --extended-lambda, so `f` may be a __device__ lambda.
#pragma once

#include "kernels/cuda/common.cuh"

namespace tcv::kernels::cuda {

/// Shared sizes and per-operand strides of N operands.
template <int N>
struct MultiIndexer {
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};

  __device__ __forceinline__ void offsets(int64_t i, int64_t* off) const {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t q = i / sizes[d];
      const int64_t r = i - q * sizes[d];
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += r * strides[k][d];
      i = q;
    }
  }
};

namespace detail {

template <int N>
bool prepare(KTensor* ops, MultiIndexer<N>& mi) {
  coalesce(ops, N);
  bool contiguous = ops[0].ndim <= 1;
  for (int k = 0; k < N && contiguous; ++k) contiguous = ops[k].ndim == 0 || ops[k].strides[0] == 1;
  mi.ndim = ops[0].ndim;
  for (int d = 0; d < mi.ndim; ++d) {
    mi.sizes[d] = ops[0].sizes[d];
    for (int k = 0; k < N; ++k) mi.strides[k][d] = ops[k].strides[d];
  }
  return contiguous;
}

template <typename Out, typename A, typename F>
__global__ void map1_contig(int64_t n, F f, Out* out, const A* a) {
  TCV_CUDA_GRID_STRIDE(i, n) out[i] = f(a[i]);
}
template <typename Out, typename A, typename F>
__global__ void map1_strided(int64_t n, F f, MultiIndexer<2> mi, Out* out, const A* a) {
  TCV_CUDA_GRID_STRIDE(i, n) {
    int64_t off[2];
    mi.offsets(i, off);
    out[off[0]] = f(a[off[1]]);
  }
}
template <typename Out, typename A, typename B, typename F>
__global__ void map2_contig(int64_t n, F f, Out* out, const A* a, const B* b) {
  TCV_CUDA_GRID_STRIDE(i, n) out[i] = f(a[i], b[i]);
}
template <typename Out, typename A, typename B, typename F>
__global__ void map2_strided(int64_t n, F f, MultiIndexer<3> mi, Out* out, const A* a, const B* b) {
  TCV_CUDA_GRID_STRIDE(i, n) {
    int64_t off[3];
    mi.offsets(i, off);
    out[off[0]] = f(a[off[1]], b[off[2]]);
  }
}
template <typename Out, typename A, typename B, typename C, typename F>
__global__ void map3_contig(int64_t n, F f, Out* out, const A* a, const B* b, const C* c) {
  TCV_CUDA_GRID_STRIDE(i, n) out[i] = f(a[i], b[i], c[i]);
}
template <typename Out, typename A, typename B, typename C, typename F>
__global__ void map3_strided(int64_t n, F f, MultiIndexer<4> mi, Out* out, const A* a, const B* b,
                             const C* c) {
  TCV_CUDA_GRID_STRIDE(i, n) {
    int64_t off[4];
    mi.offsets(i, off);
    out[off[0]] = f(a[off[1]], b[off[2]], c[off[3]]);
  }
}

}  // namespace detail

/// out = f(a), element types Out and A.
template <typename Out, typename A, typename F>
void map(const KTensor& out, F f, const KTensor& a) {
  const int64_t n = out.numel();
  if (n == 0) return;
  KTensor ops[2] = {out, a};
  MultiIndexer<2> mi;
  const int g = grid_for(n);
  if (detail::prepare<2>(ops, mi))
    detail::map1_contig<<<g, 256, 0, cur_stream()>>>(n, f, ops[0].ptr<Out>(), ops[1].ptr<A>());
  else
    detail::map1_strided<<<g, 256, 0, cur_stream()>>>(n, f, mi, ops[0].ptr<Out>(), ops[1].ptr<A>());
  TCV_CUDA_LAUNCH_CHECK();
}

/// out = f(a, b).
template <typename Out, typename A, typename B, typename F>
void map(const KTensor& out, F f, const KTensor& a, const KTensor& b) {
  const int64_t n = out.numel();
  if (n == 0) return;
  KTensor ops[3] = {out, a, b};
  MultiIndexer<3> mi;
  const int g = grid_for(n);
  if (detail::prepare<3>(ops, mi))
    detail::map2_contig<<<g, 256, 0, cur_stream()>>>(n, f, ops[0].ptr<Out>(), ops[1].ptr<A>(),
                                                     ops[2].ptr<B>());
  else
    detail::map2_strided<<<g, 256, 0, cur_stream()>>>(n, f, mi, ops[0].ptr<Out>(), ops[1].ptr<A>(),
                                                      ops[2].ptr<B>());
  TCV_CUDA_LAUNCH_CHECK();
}

/// out = f(a, b, c).
template <typename Out, typename A, typename B, typename C, typename F>
void map(const KTensor& out, F f, const KTensor& a, const KTensor& b, const KTensor& c) {
  const int64_t n = out.numel();
  if (n == 0) return;
  KTensor ops[4] = {out, a, b, c};
  MultiIndexer<4> mi;
  const int g = grid_for(n);
  if (detail::prepare<4>(ops, mi))
    detail::map3_contig<<<g, 256, 0, cur_stream()>>>(n, f, ops[0].ptr<Out>(), ops[1].ptr<A>(),
                                                     ops[2].ptr<B>(), ops[3].ptr<C>());
  else
    detail::map3_strided<<<g, 256, 0, cur_stream()>>>(n, f, mi, ops[0].ptr<Out>(), ops[1].ptr<A>(),
                                                      ops[2].ptr<B>(), ops[3].ptr<C>());
  TCV_CUDA_LAUNCH_CHECK();
}

}  // namespace tcv::kernels::cuda
