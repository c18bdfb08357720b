// Matrix products.
#pragma once

#include "engine/tensor.h"

namespace tcv::ops {

/// Matrix product with torch.matmul's rules: 1-D and 2-D operands, and batched
/// operands whose leading dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
/// y = x · weightᵀ + bias; x (..., in), weight (out, in), bias (out) or undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace tcv::ops
