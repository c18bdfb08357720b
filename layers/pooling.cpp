#include "layers/pooling.h"

#include "engine/ops/nn.h"

namespace tcv::nn {

namespace {

Pool2dOptions resolve(const char* op, Size2 kernel, Pool2dOptions opts) {
  TCV_CHECK(kernel.h > 0 && kernel.w > 0, "[", op, "] kernel_size must be positive, got ",
            kernel.tuple_str());
  if (opts.stride == Size2(0)) opts.stride = kernel;
  TCV_CHECK(opts.stride.h > 0 && opts.stride.w > 0, "[", op, "] stride must be positive, got ",
            opts.stride.tuple_str());
  TCV_CHECK(opts.padding.h >= 0 && opts.padding.w >= 0 && 2 * opts.padding.h <= kernel.h &&
                2 * opts.padding.w <= kernel.w,
            "[", op, "] padding ", opts.padding.tuple_str(),
            " must be non-negative and at most half of kernel_size ", kernel.tuple_str());
  return opts;
}

ops::Pool2dParams params(Size2 kernel, const Pool2dOptions& o) {
  ops::Pool2dParams p;
  p.kernel = kernel.arr();
  p.stride = o.stride.arr();
  p.padding = o.padding.arr();
  p.ceil_mode = o.ceil_mode;
  p.count_include_pad = o.count_include_pad;
  return p;
}

const char* py_bool(bool b) {
  return b ? "True" : "False";
}

}  // namespace

MaxPool2d::MaxPool2d(Size2 k, Pool2dOptions opts)
    : kernel_size(k), options(resolve("MaxPool2d", k, opts)) {}

Tensor MaxPool2d::forward(const Tensor& x) {
  return ops::max_pool2d(x, params(kernel_size, options));
}

std::string MaxPool2d::extra_repr() const {
  return "kernel_size=" + kernel_size.str() + ", stride=" + options.stride.str() +
         ", padding=" + options.padding.str() +
         ", dilation=1, ceil_mode=" + py_bool(options.ceil_mode);
}

AvgPool2d::AvgPool2d(Size2 k, Pool2dOptions opts)
    : kernel_size(k), options(resolve("AvgPool2d", k, opts)) {}

Tensor AvgPool2d::forward(const Tensor& x) {
  return ops::avg_pool2d(x, params(kernel_size, options));
}

std::string AvgPool2d::extra_repr() const {
  // PyTorch prints only these three, whatever ceil_mode and count_include_pad are.
  return "kernel_size=" + kernel_size.str() + ", stride=" + options.stride.str() +
         ", padding=" + options.padding.str();
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(Size2 out) : output_size(out) {
  TCV_CHECK(out.h > 0 && out.w > 0, "[AdaptiveAvgPool2d] output_size must be positive, got ",
            out.tuple_str());
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) {
  return ops::adaptive_avg_pool2d(x, output_size.arr());
}

}  // namespace tcv::nn
