#include "kernels/cpu/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/cpu/loops.h"

namespace tcv::kernels::cpu {
namespace {

template <typename T>
using acc_t = std::conditional_t<std::is_floating_point_v<T> || std::is_same_v<T, Half> ||
                                     std::is_same_v<T, BFloat16>,
                                 double, int64_t>;

template <typename T>
void sum_typed(T* out, const T* in, int64_t outer, int64_t r, int64_t inner) {
  using A = acc_t<T>;
  if (inner == 1) {
    // Rows are cut into fixed pieces summed in parallel, then added in order:
    // one long row (a full reduction) uses every thread, and the result does
    // not depend on the thread count.
    constexpr int64_t kPiece = 65536;
    const int64_t pieces = std::max<int64_t>(1, (r + kPiece - 1) / kPiece);
    std::vector<A> partial(static_cast<size_t>(outer * pieces));
    parallel_for(outer * pieces,
                 std::max<int64_t>(1, kGrain / std::max<int64_t>(1, std::min(r, kPiece))),
                 [&](int64_t b, int64_t e) {
                   for (int64_t w = b; w < e; ++w) {
                     const int64_t o = w / pieces, i0 = (w % pieces) * kPiece;
                     const T* p = in + o * r + i0;
                     const int64_t len = std::min(kPiece, r - i0);
                     A acc = 0;
#pragma omp simd reduction(+ : acc)
                     for (int64_t i = 0; i < len; ++i) acc += static_cast<A>(p[i]);
                     partial[static_cast<size_t>(w)] = acc;
                   }
                 });
    for (int64_t o = 0; o < outer; ++o) {
      A acc = 0;
      for (int64_t c = 0; c < pieces; ++c) acc += partial[static_cast<size_t>(o * pieces + c)];
      out[o] = static_cast<T>(acc);
    }
    return;
  }
  // Column sums: parallel over (outer, blocks of inner), vectorized over inner.
  const int64_t block = 256;
  const int64_t nblocks = (inner + block - 1) / block;
  parallel_for(outer * nblocks, 1, [&](int64_t b, int64_t e) {
    A acc[block];
    for (int64_t w = b; w < e; ++w) {
      const int64_t o = w / nblocks;
      const int64_t j0 = (w % nblocks) * block;
      const int64_t len = std::min(block, inner - j0);
      for (int64_t j = 0; j < len; ++j) acc[j] = 0;
      for (int64_t i = 0; i < r; ++i) {
        const T* p = in + (o * r + i) * inner + j0;
#pragma omp simd
        for (int64_t j = 0; j < len; ++j) acc[j] += static_cast<A>(p[j]);
      }
      T* q = out + o * inner + j0;
      for (int64_t j = 0; j < len; ++j) q[j] = static_cast<T>(acc[j]);
    }
  });
}

template <typename T>
void extreme_typed(bool is_max, T* out, int64_t* idx, const T* in, int64_t outer, int64_t r,
                   int64_t inner) {
  using A = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;
  parallel_for(outer * inner, std::max<int64_t>(1, kGrain / std::max<int64_t>(r, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t w = b; w < e; ++w) {
                   const int64_t o = w / inner, j = w % inner;
                   const T* p = in + o * r * inner + j;
                   A best = static_cast<A>(p[0]);
                   int64_t bi = 0;
                   for (int64_t i = 1; i < r; ++i) {
                     const A v = static_cast<A>(p[i * inner]);
                     if (best != best) break;  // NaN already won
                     if (v != v || (is_max ? v > best : v < best)) {
                       best = v;
                       bi = i;
                     }
                   }
                   out[w] = static_cast<T>(best);
                   if (idx) idx[w] = bi;
                 }
               });
}

}  // namespace

void reduce(ReduceOp op, const KTensor& out, const KTensor& in, int64_t outer, int64_t r,
            int64_t inner, const KTensor* indices) {
  if (op == ReduceOp::sum) {
    TCV_DISPATCH_ALL(in.dtype, "sum",
                     sum_typed<scalar_t>(out.ptr<scalar_t>(), in.ptr<scalar_t>(), outer, r, inner));
    return;
  }
  int64_t* idx = indices ? indices->ptr<int64_t>() : nullptr;
  TCV_DISPATCH_ALL(in.dtype, "max",
                   extreme_typed<scalar_t>(op == ReduceOp::max, out.ptr<scalar_t>(), idx,
                                           in.ptr<scalar_t>(), outer, r, inner));
}

}  // namespace tcv::kernels::cpu
