// Elementwise ops with NumPy broadcasting.
#pragma once

#include "engine/tensor.h"

namespace tcv::ops {

/// The shape two shapes broadcast to; throws naming both when they do not.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op = "broadcast");
/// Sums a (broadcast) gradient back down to `shape` (the backward of expand).
Tensor sum_to(const Tensor& t, const Shape& shape);

Tensor add(const Tensor& a, const Tensor& b, double alpha = 1.0);
/// relu(a + b) in one pass (a residual block's sum and activation), broadcasting.
Tensor add_relu(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b, double alpha = 1.0);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);

Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor square(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor relu(const Tensor& x);
/// min(max(x, 0), 6), as torch.nn.ReLU6: the gradient passes for 0 < x < 6.
Tensor relu6(const Tensor& x);
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor hardswish(const Tensor& x);
Tensor clamp(const Tensor& x, double min, double max);
/// In place, for inference paths and fused layers (not recorded by autograd).
Tensor& relu_(Tensor& x);
/// cond ? a : b, broadcasting all three.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);

/// Differentiable dtype conversion.
Tensor cast(const Tensor& x, DType dtype);
/// Copy to another device (differentiable).
Tensor to_device(const Tensor& x, Device device);
/// A contiguous copy (differentiable).
Tensor clone(const Tensor& x);

}  // namespace tcv::ops

namespace tcv {
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
}  // namespace tcv
