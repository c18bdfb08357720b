// Softmax statistics along the rows of a tile column (tile_reduce.cuh): the
// maximum and Σ exp(v − max), shared by softmax, log-softmax and cross-entropy
// as kernels/cpu/exp_sum.h is on the CPU. Included only from .cu files.
#pragma once

#include "kernels/cuda/tile_reduce.cuh"

namespace tcv::kernels::cuda {

template <typename A>
struct ExpSum {
  A max;  ///< the largest value (−inf for none; NaN never becomes it)
  A sum;  ///< Σ exp(v − max)
};

/// The statistics of the r values load(i) of this thread's tile column: the
/// column's by threads take every by-th row and combine in shared memory `sm`
/// (256 A). Every thread of the block calls it, `valid` or not (threads outside
/// the data take part in the reductions); all of the column get the result. A
/// column of only −inf gives a NaN sum's log later (inf − inf), as in torch.
template <typename A, typename Load>
__device__ __forceinline__ ExpSum<A> tile_exp_sum(bool valid, int64_t r, Load load, A* sm) {
  A mx = -INFINITY;
  if (valid)
    for (int64_t i = threadIdx.y; i < r; i += blockDim.y) {
      const A v = load(i);
      mx = mx < v ? v : mx;
    }
  mx = tile_allreduce(mx, sm, [](A a, A b) { return a < b ? b : a; });
  A sum = 0;
  if (valid)
    for (int64_t i = threadIdx.y; i < r; i += blockDim.y) sum += ::exp(load(i) - mx);
  sum = tile_allreduce(sum, sm, [](A a, A b) { return a + b; });
  return {mx, sum};
}

}  // namespace tcv::kernels::cuda
