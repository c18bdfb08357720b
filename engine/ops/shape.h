// Ops that move data between tensors: concatenation, padding, indexing, sorting.
#pragma once

#include <vector>

#include "engine/tensor.h"

namespace tcv::ops {

Tensor cat(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& xs, int64_t dim = 0);
/// Pieces of `split_size` along dim (the last may be smaller); views.
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
/// Pieces of the given sizes along dim; views.
std::vector<Tensor> split(const Tensor& x, const Shape& sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);

enum class PadMode : uint8_t { constant, reflect, replicate };
/// Pads the last dims: pads = {left, right, top, bottom, ...} as torch.nn.functional.pad.
Tensor pad(const Tensor& x, const Shape& pads, PadMode mode = PadMode::constant,
           double value = 0.0);

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
/// out = x; out[index[i]][j] += src[i][j] along dim (differentiable in x and src).
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

/// k largest (or smallest) along dim: values and i64 indices, sorted when `sorted`.
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                               bool sorted = true);
/// Stable sort along dim: values and i64 indices.
std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false);

}  // namespace tcv::ops
