// Elementwise loops on the GPU: out[i] = f(in...[i]) over tensors that share
// out's shape (inputs broadcast with stride 0). Dims are coalesced first; all
// operands contiguous takes a plain indexed loop, four elements per thread
// with vector loads and stores when every pointer allows, anything else
// computes each operand's offset from the linear index. Below 2^31 elements
// the indices are 32-bit and the offsets divide through FastDivmod (no
// emulated int64 division). Included only from .cu files compiled with
// --extended-lambda, so `f` may be a __device__ lambda.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/divmod.h"
#include "kernels/cuda/settings.h"

namespace tcv::kernels::cuda {

/// Shared sizes and per-operand strides of N operands. Div divides the
/// linear index by each size: WideDivmod (int64 indices, any size) or
/// FastDivmod (32-bit indices, fewer than 2^31 elements). Filled by
/// detail::prepare.
template <int N, typename Div = WideDivmod>
struct MultiIndexer {
  /// The linear index type: int64_t for WideDivmod, uint32_t for FastDivmod.
  using index_t = std::remove_cvref_t<decltype(std::declval<const Div&>().divisor())>;

  int ndim = 0;
  Div sizes[kMaxDims] = {};           // innermost dim first
  int64_t strides[N][kMaxDims] = {};  // innermost dim first, in elements

  /// Element offset of each operand at the row-major linear index `i`.
  __device__ __forceinline__ void offsets(index_t i, int64_t* off) const {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = 0;
      // Unrolled over constant dims (with a break) so the parameters are read
      // in place, not copied to local memory for a dynamic index.
#pragma unroll
    for (int d = 0; d < kMaxDims; ++d) {
      if (d == ndim) break;
      index_t q, r;
      sizes[d].divmod(i, q, r);
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += static_cast<int64_t>(r) * strides[k][d];
      i = q;
    }
  }
};

namespace detail {

/// Coalesces ops (ops[0] is the output) and fills mi; true when every operand
/// is then contiguous (one dim of stride 1, or a single element).
template <int N, typename Div>
bool prepare(KTensor* ops, MultiIndexer<N, Div>& mi) {
  using I = typename MultiIndexer<N, Div>::index_t;
  coalesce(ops, N);
  bool contiguous = ops[0].ndim <= 1;
  for (int k = 0; k < N && contiguous; ++k) contiguous = ops[k].ndim == 0 || ops[k].strides[0] == 1;
  mi.ndim = ops[0].ndim;
  for (int d = 0; d < mi.ndim; ++d) {
    const int j = mi.ndim - 1 - d;
    mi.sizes[j] = Div(static_cast<I>(ops[0].sizes[d]));
    for (int k = 0; k < N; ++k) mi.strides[k][j] = ops[k].strides[d];
  }
  return contiguous;
}

template <typename Out, typename F, typename... In>
__device__ __forceinline__ void apply4(Lanes<Out, 4>& o, const F& f, Lanes<In, 4>... x) {
#pragma unroll
  for (int j = 0; j < 4; ++j) o.v[j] = f(x.v[j]...);
}

template <typename F, typename Out, typename... In, size_t... K>
__device__ __forceinline__ void apply_at(const F& f, const int64_t* off, std::index_sequence<K...>,
                                         Out* out, const In*... in) {
  out[off[0]] = f(in[off[K + 1]]...);
}

template <typename I, typename F, typename Out, typename... In>
__global__ void map_contig(I n, F f, Out* out, const In*... in) {
  const I step = static_cast<I>(blockDim.x) * gridDim.x;
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    out[i] = f(in[i]...);
}

// Every pointer aligned to four of its elements: vector i covers elements
// 4i..4i+3; the n % 4 last elements go one each to the first threads.
template <typename I, typename F, typename Out, typename... In>
__global__ void map_vec4(I n, F f, Out* out, const In*... in) {
  const I nv = n / 4;
  const I first = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x;
  const I step = static_cast<I>(blockDim.x) * gridDim.x;
  for (I v = first; v < nv; v += step) {
    Lanes<Out, 4> o;
    apply4(o, f, reinterpret_cast<const Lanes<In, 4>*>(in)[v]...);
    reinterpret_cast<Lanes<Out, 4>*>(out)[v] = o;
  }
  const I i = nv * 4 + first;
  if (i < n) out[i] = f(in[i]...);
}

template <typename F, typename Ix, typename Out, typename... In>
__global__ void map_strided(int64_t n, F f, Ix mi, Out* out, const In*... in) {
  using I = typename Ix::index_t;
  const I m = static_cast<I>(n);
  const I step = static_cast<I>(blockDim.x) * gridDim.x;
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < m; i += step) {
    int64_t off[1 + sizeof...(In)];
    mi.offsets(i, off);
    apply_at(f, off, std::index_sequence_for<In...>{}, out, in...);
  }
}

template <typename I, typename F, typename Out, typename... In>
void launch_contig(I n, F f, Out* out, const In*... in) {
  if (lanes_aligned<4>(out) && (lanes_aligned<4>(in) && ...))
    map_vec4<<<grid_for(n / 4), 256, 0, cur_stream()>>>(n, f, out, in...);
  else
    map_contig<<<grid_for(n), 256, 0, cur_stream()>>>(n, f, out, in...);
  TCV_CUDA_LAUNCH_CHECK();
}

template <typename Ix, typename F, typename Out, typename... In>
void launch_strided(int64_t n, F f, const Ix& mi, Out* out, const In*... in) {
  map_strided<<<grid_for(n), 256, 0, cur_stream()>>>(n, f, mi, out, in...);
  TCV_CUDA_LAUNCH_CHECK();
}

/// out = f(in...) over ops = {out, in...}, element types Out and In...
template <typename Out, typename... In, typename F, size_t... K>
void map_n(F f, KTensor* ops, std::index_sequence<K...>) {
  constexpr int N = 1 + sizeof...(In);
  const int64_t n = ops[0].numel();
  if (n == 0) return;
  if (n < FastDivmod::kLimit && !get_force_wide_indices()) {
    MultiIndexer<N, FastDivmod> mi;
    if (prepare<N>(ops, mi))
      launch_contig(static_cast<uint32_t>(n), f, ops[0].ptr<Out>(), ops[K + 1].ptr<const In>()...);
    else
      launch_strided(n, f, mi, ops[0].ptr<Out>(), ops[K + 1].ptr<const In>()...);
  } else {
    MultiIndexer<N> mi;
    if (prepare<N>(ops, mi))
      launch_contig(n, f, ops[0].ptr<Out>(), ops[K + 1].ptr<const In>()...);
    else
      launch_strided(n, f, mi, ops[0].ptr<Out>(), ops[K + 1].ptr<const In>()...);
  }
}

}  // namespace detail

/// out = f(a), element types Out and A.
template <typename Out, typename A, typename F>
void map(const KTensor& out, F f, const KTensor& a) {
  KTensor ops[2] = {out, a};
  detail::map_n<Out, A>(f, ops, std::make_index_sequence<1>{});
}

/// out = f(a, b).
template <typename Out, typename A, typename B, typename F>
void map(const KTensor& out, F f, const KTensor& a, const KTensor& b) {
  KTensor ops[3] = {out, a, b};
  detail::map_n<Out, A, B>(f, ops, std::make_index_sequence<2>{});
}

/// out = f(a, b, c).
template <typename Out, typename A, typename B, typename C, typename F>
void map(const KTensor& out, F f, const KTensor& a, const KTensor& b, const KTensor& c) {
  KTensor ops[4] = {out, a, b, c};
  detail::map_n<Out, A, B, C>(f, ops, std::make_index_sequence<3>{});
}

/// out = f(a, b, c, d).
template <typename Out, typename A, typename B, typename C, typename D, typename F>
void map(const KTensor& out, F f, const KTensor& a, const KTensor& b, const KTensor& c,
         const KTensor& d) {
  KTensor ops[5] = {out, a, b, c, d};
  detail::map_n<Out, A, B, C, D>(f, ops, std::make_index_sequence<4>{});
}

}  // namespace tcv::kernels::cuda
