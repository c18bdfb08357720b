#include "layers/conv.h"

#include <cmath>

#include "engine/ops/nn.h"
#include "layers/init.h"

namespace tcv::nn {

Conv2d::Conv2d(int64_t in_ch, int64_t out_ch, Size2 ks, Conv2dOptions opts)
    : in_channels(in_ch), out_channels(out_ch), kernel_size(ks), options(opts) {
  TCV_CHECK(in_ch > 0 && out_ch > 0, "[Conv2d] channels must be positive, got in_channels=", in_ch,
            ", out_channels=", out_ch);
  TCV_CHECK(opts.groups > 0 && in_ch % opts.groups == 0 && out_ch % opts.groups == 0,
            "[Conv2d] groups=", opts.groups, " must divide in_channels=", in_ch,
            " and out_channels=", out_ch);
  TCV_CHECK(ks.h > 0 && ks.w > 0, "[Conv2d] kernel_size must be positive, got ", ks.tuple_str());
  TCV_CHECK(opts.stride.h > 0 && opts.stride.w > 0 && opts.dilation.h > 0 && opts.dilation.w > 0 &&
                opts.padding.h >= 0 && opts.padding.w >= 0,
            "[Conv2d] invalid stride ", opts.stride.tuple_str(), ", padding ",
            opts.padding.tuple_str(), " or dilation ", opts.dilation.tuple_str());
  weight = register_parameter("weight", empty({out_ch, in_ch / opts.groups, ks.h, ks.w}));
  if (opts.bias) bias = register_parameter("bias", empty({out_ch}));
  reset_parameters();
}

void Conv2d::reset_parameters() {
  // kaiming_uniform_(a=sqrt(5)) == U(-1/sqrt(fan_in), 1/sqrt(fan_in)), as torch.nn.Conv2d.
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound =
        1.0 / std::sqrt(static_cast<double>(init::fan_in_and_fan_out(weight).first));
    init::uniform_(bias, -bound, bound);
  }
}

namespace {

ops::Conv2dParams params_of(const Conv2dOptions& o) {
  ops::Conv2dParams p;
  p.stride = o.stride.arr();
  p.padding = o.padding.arr();
  p.dilation = o.dilation.arr();
  p.groups = o.groups;
  return p;
}

}  // namespace

Tensor Conv2d::forward(const Tensor& x) {
  return ops::conv2d(x, weight, bias, params_of(options));
}

Tensor Conv2d::forward_relu(const Tensor& x) {
  return ops::conv2d_relu(x, weight, bias, params_of(options));
}

std::string Conv2d::extra_repr() const {
  std::string s = std::to_string(in_channels) + ", " + std::to_string(out_channels) +
                  ", kernel_size=" + kernel_size.tuple_str() +
                  ", stride=" + options.stride.tuple_str();
  if (options.padding != Size2(0)) s += ", padding=" + options.padding.tuple_str();
  if (options.dilation != Size2(1)) s += ", dilation=" + options.dilation.tuple_str();
  if (options.groups != 1) s += ", groups=" + std::to_string(options.groups);
  if (!options.bias) s += ", bias=False";
  return s;
}

}  // namespace tcv::nn
