#include "kernels/cuda/exp_sum.cuh"
#include "kernels/cuda/softmax.h"

namespace tcv::kernels::cuda {
namespace {

// One tile group per (outer, block of columns): the by threads of a column
// split its r rows; the max and the sum of exponentials are combined in shared
// memory, then every thread writes its own rows.
template <typename T>
__global__ void softmax_kernel(bool log, T* out, const T* in, int64_t r, int64_t inner,
                               int64_t col_blocks, int64_t groups) {
  using A = acc_t<T>;
  TCV_TILE_SMEM(A, sm);
  for_each_tile(col_blocks, groups, inner, [&](const TilePos& p) {
    const int64_t base = p.o * r * inner + p.j;
    // NaN never becomes the maximum (as std::max on the CPU); it spreads through exp.
    const ExpSum<A> st = tile_exp_sum<A>(
        p.valid, r, [&](int64_t i) { return to_acc(in[base + i * inner]); }, sm);
    const A mx = st.max, sum = st.sum;
    if (!p.valid) return;
    if (log) {
      const A shift = mx + ::log(sum);  // a row of only -inf gives NaN, as in torch
      for (int64_t i = threadIdx.y; i < r; i += blockDim.y)
        out[base + i * inner] = convert<T>(to_acc(in[base + i * inner]) - shift);
    } else {
      const A inv = A(1) / sum;
      for (int64_t i = threadIdx.y; i < r; i += blockDim.y)
        out[base + i * inner] = convert<T>(::exp(to_acc(in[base + i * inner]) - mx) * inv);
    }
  });
}

template <typename T>
__global__ void softmax_backward_kernel(bool log, T* dx, const T* dy, const T* y, int64_t r,
                                        int64_t inner, int64_t col_blocks, int64_t groups) {
  using A = acc_t<T>;
  TCV_TILE_SMEM(A, sm);
  for_each_tile(col_blocks, groups, inner, [&](const TilePos& p) {
    const int64_t base = p.o * r * inner + p.j;
    A dot = 0;
    if (p.valid)
      for (int64_t i = threadIdx.y; i < r; i += blockDim.y) {
        const int64_t q = base + i * inner;
        dot += log ? to_acc(dy[q]) : to_acc(dy[q]) * to_acc(y[q]);
      }
    dot = tile_allreduce(dot, sm, [](A a, A b) { return a + b; });
    if (!p.valid) return;
    for (int64_t i = threadIdx.y; i < r; i += blockDim.y) {
      const int64_t q = base + i * inner;
      const A g = to_acc(dy[q]), v = to_acc(y[q]);
      dx[q] = convert<T>(log ? g - ::exp(v) * dot : v * (g - dot));
    }
  });
}

const char* kind_name(SoftmaxKind kind) {
  return kind == SoftmaxKind::softmax ? "softmax" : "log_softmax";
}

}  // namespace

void softmax(SoftmaxKind kind, const KTensor& out, const KTensor& in, int64_t outer, int64_t r,
             int64_t inner) {
  if (outer * r * inner == 0) return;
  const Tile t = make_tile(outer, r, inner);
  const bool log = kind == SoftmaxKind::log_softmax;
  TCV_CUDA_DISPATCH_FLOAT(in.dtype, kind_name(kind), {
    softmax_kernel<scalar_t><<<t.blocks, t.block(), 0, cur_stream()>>>(
        log, out.ptr<scalar_t>(), in.ptr<scalar_t>(), r, inner, t.col_blocks, t.groups);
    TCV_CUDA_LAUNCH_CHECK();
  });
}

void softmax_backward(SoftmaxKind kind, const KTensor& dx, const KTensor& dy, const KTensor& y,
                      int64_t outer, int64_t r, int64_t inner) {
  if (outer * r * inner == 0) return;
  const Tile t = make_tile(outer, r, inner);
  const bool log = kind == SoftmaxKind::log_softmax;
  TCV_CUDA_DISPATCH_FLOAT(y.dtype, kind_name(kind), {
    softmax_backward_kernel<scalar_t><<<t.blocks, t.block(), 0, cur_stream()>>>(
        log, dx.ptr<scalar_t>(), dy.ptr<scalar_t>(), y.ptr<scalar_t>(), r, inner, t.col_blocks,
        t.groups);
    TCV_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace tcv::kernels::cuda
