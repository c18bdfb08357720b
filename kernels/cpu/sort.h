// Sorting CPU kernels: stable sort and top-k along one dim of a contiguous
// input viewed as (outer, n, inner). NaN sorts above every number, as in PyTorch.
#pragma once

#include "kernels/base.h"

namespace tcv::kernels::cpu {

/// values/indices (outer, n, inner) = in sorted along n; indices are i64 positions
/// in n. Stable: equal values keep their input order.
void sort(const KTensor& values, const KTensor& indices, const KTensor& in, int64_t outer,
          int64_t n, int64_t inner, bool descending);

/// values/indices (outer, k, inner) = the k largest (or smallest) along n, in
/// sorted order; ties go to the lower index.
void topk(const KTensor& values, const KTensor& indices, const KTensor& in, int64_t outer,
          int64_t n, int64_t inner, int64_t k, bool largest);

}  // namespace tcv::kernels::cpu
