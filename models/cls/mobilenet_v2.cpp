#include "models/cls/mobilenet_v2.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "engine/ops/elementwise.h"
#include "engine/ops/nn.h"
#include "models/registry.h"

namespace tcv::models::cls {

int64_t make_divisible(double v, int64_t divisor, int64_t min_value) {
  if (min_value <= 0) min_value = divisor;
  int64_t new_v = std::max(min_value, static_cast<int64_t>(v + divisor / 2.0) / divisor * divisor);
  if (static_cast<double>(new_v) < 0.9 * v) new_v += divisor;
  return new_v;
}

ConvBNReLU6::ConvBNReLU6(int64_t in_planes, int64_t out_planes, int64_t kernel_size, int64_t stride,
                         int64_t groups) {
  push_back(std::make_shared<nn::Conv2d>(
      in_planes, out_planes, kernel_size,
      nn::Conv2dOptions{
          .stride = stride, .padding = (kernel_size - 1) / 2, .groups = groups, .bias = false}));
  push_back(std::make_shared<nn::BatchNorm2d>(out_planes));
  push_back(std::make_shared<nn::ReLU6>());
}

InvertedResidual::InvertedResidual(int64_t inp, int64_t oup, int64_t stride, int64_t expand_ratio) {
  TCV_CHECK(stride == 1 || stride == 2, "[InvertedResidual] stride must be 1 or 2, got ", stride);
  const auto hidden_dim = static_cast<int64_t>(std::round(static_cast<double>(inp * expand_ratio)));
  use_res_connect = stride == 1 && inp == oup;
  conv = register_module("conv", std::make_shared<nn::Sequential>());
  if (expand_ratio != 1) conv->push_back(std::make_shared<ConvBNReLU6>(inp, hidden_dim, 1));
  conv->push_back(std::make_shared<ConvBNReLU6>(hidden_dim, hidden_dim, 3, stride, hidden_dim));
  conv->push_back(
      std::make_shared<nn::Conv2d>(hidden_dim, oup, 1, nn::Conv2dOptions{.bias = false}));
  conv->push_back(std::make_shared<nn::BatchNorm2d>(oup));
}

Tensor InvertedResidual::forward(const Tensor& x) {
  return use_res_connect ? x + conv->forward(x) : conv->forward(x);
}

MobileNetV2::MobileNetV2(MobileNetV2Options opts) : options(opts) {
  TCV_CHECK(opts.num_classes > 0 && opts.in_channels > 0, "[MobileNetV2] num_classes (",
            opts.num_classes, ") and in_channels (", opts.in_channels, ") must be positive");
  TCV_CHECK(opts.width_mult > 0 && opts.round_nearest > 0, "[MobileNetV2] width_mult (",
            opts.width_mult, ") and round_nearest (", opts.round_nearest, ") must be positive");
  // t (expansion), c (channels), n (blocks), s (first stride), as torchvision.
  constexpr std::array<std::array<int64_t, 4>, 7> kSetting{{{1, 16, 1, 1},
                                                            {6, 24, 2, 2},
                                                            {6, 32, 3, 2},
                                                            {6, 64, 4, 2},
                                                            {6, 96, 3, 1},
                                                            {6, 160, 3, 2},
                                                            {6, 320, 1, 1}}};
  int64_t input_channel = make_divisible(32 * opts.width_mult, opts.round_nearest);
  last_channel = make_divisible(1280 * std::max(1.0, opts.width_mult), opts.round_nearest);
  features = register_module("features", std::make_shared<nn::Sequential>());
  features->push_back(std::make_shared<ConvBNReLU6>(opts.in_channels, input_channel, 3, 2));
  for (const auto& [t, c, n, s] : kSetting) {
    const int64_t output_channel =
        make_divisible(static_cast<double>(c) * opts.width_mult, opts.round_nearest);
    for (int64_t i = 0; i < n; ++i) {
      features->push_back(
          std::make_shared<InvertedResidual>(input_channel, output_channel, i == 0 ? s : 1, t));
      input_channel = output_channel;
    }
  }
  features->push_back(std::make_shared<ConvBNReLU6>(input_channel, last_channel, 1));
  classifier = register_module(
      "classifier", std::make_shared<nn::Sequential>(std::initializer_list<nn::ModulePtr>{
                        std::make_shared<nn::Dropout>(opts.dropout),
                        std::make_shared<nn::Linear>(last_channel, opts.num_classes)}));

  nn::init::init_cnn_weights(*this, /*linear_std=*/0.01);
}

Tensor MobileNetV2::forward(const Tensor& x) {
  TCV_CHECK(x.dim() == 4 && x.size(1) == options.in_channels, "[MobileNetV2] expects input (N, ",
            options.in_channels, ", H, W), got ", x.shape_str());
  const Tensor h = ops::adaptive_avg_pool2d(features->forward(x), {1, 1}).flatten(1);  // (N, 1280)
  return classifier->forward(h);
}

void register_mobilenet_models() {
  register_family_model<MobileNetV2, MobileNetV2Options>(
      {.name = "mobilenet_v2",
       .description =
           "MobileNetV2 (width 1.0, ReLU6, dropout 0.2); torchvision's architecture and names",
       .reference = {.num_classes = 1000, .in_channels = 3}},
      [](MobileNetV2Options o) { return std::make_shared<MobileNetV2>(o); });
}

}  // namespace tcv::models::cls
