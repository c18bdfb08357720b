// Indexing kernels on the GPU, the same entry points and semantics as
// kernels/cpu/index.h: index_select, gather, scatter_add, masked_fill.
// Data movement works on element bits, so every dtype is served.
//
// Index tensors are i32 or i64 with every value inside the indexed dim, which
// the ops check first (find_index_out_of_range: one small device-to-host copy,
// so one sync, per check).
#pragma once

#include <vector>

#include "kernels/cpu/index.h"
#include "kernels/cuda/entry.h"

TCV_CUDA_HEADER_BEGIN
namespace tcv::kernels::cuda {

/// out[.., i, ..] = in[.., index[i], ..]; in and out contiguous, index 1-D (any stride).
TCV_CUDA_API void index_select(const KTensor& out, const KTensor& in, int dim, const KTensor& index)
    TCV_CUDA_ENTRY;

/// out[i][j][k] = in[i][index[i][j][k]][k] (for dim 1); any strides.
TCV_CUDA_API void gather(const KTensor& out, const KTensor& in, int dim, const KTensor& index)
    TCV_CUDA_ENTRY;

/// out[i][index[i][j][k]][k] += src[i][j][k] (for dim 1) with atomics, so the
/// order of accumulation (and the last bits of float sums) may vary.
TCV_CUDA_API void scatter_add(const KTensor& out, int dim, const KTensor& index, const KTensor& src)
    TCV_CUDA_ENTRY;

/// out = mask ? value : in; mask bool, broadcast to out's shape.
TCV_CUDA_API void masked_fill(const KTensor& out, const KTensor& in, const KTensor& mask,
                              double value) TCV_CUDA_ENTRY;

/// *result = the first index (in row-major order) outside [0, size), if any.
TCV_CUDA_API void find_index_out_of_range(const KTensor& index, int64_t size,
                                          IndexOutOfRange* result) TCV_CUDA_ENTRY;

}  // namespace tcv::kernels::cuda
TCV_CUDA_HEADER_END
