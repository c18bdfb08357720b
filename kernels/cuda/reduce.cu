#include "kernels/cuda/handles.cuh"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/tile_reduce.cuh"

namespace tcv::kernels::cuda {
namespace {

template <typename T>
constexpr bool is_float_v =
    std::is_floating_point_v<T> || std::is_same_v<T, half> || std::is_same_v<T, bf16>;

// Sums: float for f32/f16/bf16, double for f64, i64 for integers and bool.
template <typename T>
using sum_acc_t = std::conditional_t<is_float_v<T>, acc_t<T>, int64_t>;
// Extremes compare in float for the 16-bit floats and in int for bool/u8.
template <typename T>
using ext_acc_t = std::conditional_t<std::is_same_v<T, half> || std::is_same_v<T, bf16>, float,
                                     std::conditional_t<(sizeof(T) == 1), int, T>>;

template <typename A>
__device__ __forceinline__ bool is_nan(A v) {
  if constexpr (std::is_floating_point_v<A>)
    return v != v;
  else
    return false;
}

template <typename A>
struct SumOp {
  using Acc = A;
  static constexpr bool kIndexed = false;
  struct S {
    A v;
    int64_t i;  // unused
  };
  __device__ static S identity() { return {A(0), 0}; }
  __device__ static S make(A v, int64_t) { return {v, 0}; }
  __device__ static S combine(S a, S b) { return {A(a.v + b.v), 0}; }
};

// (value, position) pairs; i < 0 marks the empty identity. NaN beats every
// number, and among equals (or NaNs) the lower position wins, so the result is
// the first extreme whatever the order of combination.
template <typename A, bool IsMax>
struct ExtremeOp {
  using Acc = A;
  static constexpr bool kIndexed = true;
  struct S {
    A v;
    int64_t i;
  };
  __device__ static S identity() { return {A(0), -1}; }
  __device__ static S make(A v, int64_t i) { return {v, i}; }
  __device__ static S combine(S a, S b) {
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    const bool an = is_nan(a.v), bn = is_nan(b.v);
    if (an || bn) {
      if (an && bn) return a.i < b.i ? a : b;
      return an ? a : b;
    }
    if (IsMax ? a.v > b.v : a.v < b.v) return a;
    if (IsMax ? b.v > a.v : b.v < a.v) return b;
    return a.i < b.i ? a : b;
  }
};

// out[(q, j)] = reduce over rows [k·chunk, (k+1)·chunk) ∩ [0, r) of column j of
// outer slice o, q = o·chunks + k. in_idx, when given, holds the position each
// input element stands for (the second pass over per-chunk partials).
template <class Op, typename In, typename Out>
__global__ void reduce_kernel(const In* in, const int64_t* in_idx, Out* out, int64_t* out_idx,
                              int64_t r, int64_t inner, int64_t chunks, int64_t chunk,
                              int64_t col_blocks, int64_t groups) {
  using A = typename Op::Acc;
  using S = typename Op::S;
  TCV_TILE_SMEM(S, sm);
  for_each_tile(col_blocks, groups, inner, [&](const TilePos& p) {
    S s = Op::identity();
    if (p.valid) {
      const int64_t o = p.o / chunks, k = p.o % chunks;
      const int64_t i0 = k * chunk, i1 = min(r, i0 + chunk);
      const int64_t base = o * r * inner + p.j;
      for (int64_t i = i0 + threadIdx.y; i < i1; i += blockDim.y) {
        const int64_t off = base + i * inner;
        s = Op::combine(s, Op::make(convert<A>(in[off]), in_idx ? in_idx[off] : i));
      }
    }
    s = tile_allreduce(s, sm, [](S a, S b) { return Op::combine(a, b); });
    if (p.valid && threadIdx.y == 0) {
      const int64_t w = p.o * inner + p.j;
      out[w] = convert<Out>(s.v);
      if (out_idx) out_idx[w] = s.i;
    }
  });
}

template <class Op, typename In, typename Out>
void launch(const In* in, const int64_t* in_idx, Out* out, int64_t* out_idx, int64_t outer,
            int64_t r, int64_t inner, int64_t chunks, int64_t chunk) {
  const Tile t = make_tile(outer * chunks, std::min(chunk, r), inner);
  reduce_kernel<Op, In, Out><<<t.blocks, t.block(), 0, cur_stream()>>>(
      in, in_idx, out, out_idx, r, inner, chunks, chunk, t.col_blocks, t.groups);
  TCV_CUDA_LAUNCH_CHECK();
}

template <class Op, typename T>
void run(const T* in, T* out, int64_t* idx, int64_t outer, int64_t r, int64_t inner) {
  using A = typename Op::Acc;
  // Few tiles for a long r (a full reduction, a few long columns): split r into
  // chunks reduced by separate blocks into partials (kept in the accumulation
  // type), then reduce the partials. No atomics, so the result is deterministic.
  const Tile t = make_tile(outer, r, inner);
  const int64_t target = int64_t(num_sms()) * 4;
  const int64_t tiles = (t.groups + t.bz - 1) / t.bz;
  int64_t chunks = 1;
  if (tiles < target && r >= 4096)
    chunks = std::min<int64_t>((target + tiles - 1) / tiles, (r + 2047) / 2048);
  if (chunks <= 1) {
    launch<Op, T, T>(in, nullptr, out, idx, outer, r, inner, 1, r);
    return;
  }
  const int64_t chunk = (r + chunks - 1) / chunks;
  chunks = (r + chunk - 1) / chunk;
  const int64_t n_part = outer * chunks * inner;
  Workspace part(static_cast<size_t>(n_part) * sizeof(A));
  Workspace part_idx(Op::kIndexed ? static_cast<size_t>(n_part) * sizeof(int64_t) : 0);
  A* pv = static_cast<A*>(part.get());
  int64_t* pi = static_cast<int64_t*>(part_idx.get());
  launch<Op, T, A>(in, nullptr, pv, pi, outer, r, inner, chunks, chunk);
  launch<Op, A, T>(pv, pi, out, idx, outer, chunks, inner, 1, chunks);
}

}  // namespace

void reduce(ReduceOp op, const KTensor& out, const KTensor& in, int64_t outer, int64_t r,
            int64_t inner, const KTensor* indices) {
  if (op == ReduceOp::sum) {
    if (outer * inner == 0) return;
    if (r == 0) {
      TCV_CUDA_CHECK(cudaMemsetAsync(
          out.data, 0, static_cast<size_t>(outer * inner) * dtype_size(out.dtype), cur_stream()));
      return;
    }
    TCV_CUDA_DISPATCH_ALL(in.dtype, "sum", {
      run<SumOp<sum_acc_t<scalar_t>>, scalar_t>(in.ptr<scalar_t>(), out.ptr<scalar_t>(), nullptr,
                                                outer, r, inner);
    });
    return;
  }
  const bool is_max = op == ReduceOp::max;
  if (outer * inner == 0) return;
  int64_t* idx = indices ? indices->ptr<int64_t>() : nullptr;
  TCV_CUDA_DISPATCH_ALL(in.dtype, is_max ? "max" : "min", {
    using A = ext_acc_t<scalar_t>;
    if (is_max)
      run<ExtremeOp<A, true>, scalar_t>(in.ptr<scalar_t>(), out.ptr<scalar_t>(), idx, outer, r,
                                        inner);
    else
      run<ExtremeOp<A, false>, scalar_t>(in.ptr<scalar_t>(), out.ptr<scalar_t>(), idx, outer, r,
                                         inner);
  });
}

}  // namespace tcv::kernels::cuda
