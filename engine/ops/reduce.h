// Reductions over dimensions, with keepdim.
#pragma once

#include "engine/tensor.h"

namespace tcv::ops {

/// Sum over `dims` (all dims when empty).
Tensor sum(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
/// Variance over `dims`; `correction` 1 is the unbiased estimator (PyTorch's default).
Tensor var(const Tensor& x, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);
/// Max/min over one dim: values and (i64) indices of the first extreme.
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
/// Max/min of all elements (0-d).
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);

}  // namespace tcv::ops
