// Indexing CPU kernels: index_select, gather, scatter_add and masked_fill.
// Data movement works on element bits, so every dtype is served.
//
// Index tensors are i32 or i64 with every value inside the indexed dim: the ops
// check that first (find_index_out_of_range), so the kernels do not.
#pragma once

#include <vector>

#include "kernels/base.h"

namespace tcv::kernels {

/// Whether an index lies outside [0, size), and one such value.
struct IndexOutOfRange {
  bool found = false;
  int64_t value = 0;
};

}  // namespace tcv::kernels

namespace tcv::kernels::cpu {

/// out = in with dim `dim` re-indexed by the 1-D `index`:
/// out[.., i, ..] = in[.., index[i], ..]. `in` and `out` must be contiguous.
void index_select(const KTensor& out, const KTensor& in, int dim, const KTensor& index);

/// out[i][j][k] = in[i][index[i][j][k]][k] (for dim 1); out has index's shape.
/// Any strides (index may be broadcast with 0 strides).
void gather(const KTensor& out, const KTensor& in, int dim, const KTensor& index);

/// out[i][index[i][j][k]][k] += src[i][j][k] (for dim 1), iterating over index's
/// shape; `out` already holds the base values. Parallel over the positions
/// outside `dim`, so repeated indices accumulate without races.
void scatter_add(const KTensor& out, int dim, const KTensor& index, const KTensor& src);

/// out = mask ? value : in. `mask` is bool, broadcast to out's shape (0 strides).
void masked_fill(const KTensor& out, const KTensor& in, const KTensor& mask, double value);

/// *result = an index of `index` (i32 or i64, any strides) outside [0, size), if any.
void find_index_out_of_range(const KTensor& index, int64_t size, IndexOutOfRange* result);

}  // namespace tcv::kernels::cpu
