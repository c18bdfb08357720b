// How a BLAS (OpenBLAS, oneDNN, cuBLAS) sees a strided operand: the last two
// dims as a matrix with a leading dimension, transposed or not, and whether
// batch dims fold into the row dim. Shared by the CPU and CUDA GEMM paths.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/base.h"

namespace tcv::kernels {

/// Whether a GEMM operand is used as stored or transposed.
enum class Trans : uint8_t { no, yes };

struct MatLayout {
  Trans trans = Trans::no;
  int64_t ld = 1;
  bool ok = false;  ///< false: neither dim has unit stride, copy first
};

inline MatLayout mat_layout(const KTensor& t) {
  const int nd = t.ndim;
  const int64_t rows = t.sizes[nd - 2], cols = t.sizes[nd - 1];
  const int64_t sr = t.strides[nd - 2], sc = t.strides[nd - 1];
  // A single row or column has a free stride on its size-1 dim.
  if ((sc == 1 || cols == 1) && (rows == 1 || sr >= std::max<int64_t>(cols, 1)))
    return {Trans::no, rows == 1 ? std::max<int64_t>(cols, 1) : sr, true};
  if ((sr == 1 || rows == 1) && (cols == 1 || sc >= std::max<int64_t>(rows, 1)))
    return {Trans::yes, cols == 1 ? std::max<int64_t>(rows, 1) : sc, true};
  return {};
}

/// Whether the batch dims and the row dim of t walk memory as one row index
/// with stride ld (so (B..., m, x) is a (B·m, x) matrix).
inline bool rows_fold(const KTensor& t, int64_t ld) {
  int64_t expect = ld * t.sizes[t.ndim - 2];
  for (int i = t.ndim - 3; i >= 0; --i) {
    if (t.sizes[i] == 1) continue;
    if (t.strides[i] != expect) return false;
    expect *= t.sizes[i];
  }
  return true;
}

}  // namespace tcv::kernels
