#include "models/seg/heads.h"

#include "engine/ops/nn.h"
#include "engine/ops/shape.h"

namespace tcv::models::seg {

namespace {

/// nn.ModuleList: children named by position, never run as a chain.
class ModuleList : public nn::Sequential {
 public:
  Tensor forward(const Tensor&) override {
    TCV_THROW("[ModuleList] is a container: run its modules one by one");
  }
  std::string type_name() const override { return "ModuleList"; }
};

std::shared_ptr<nn::Conv2d> conv(int64_t in, int64_t out, int64_t kernel,
                                 nn::Conv2dOptions opts = {.bias = false}) {
  return std::make_shared<nn::Conv2d>(in, out, kernel, opts);
}

/// Conv (no bias) → BN → ReLU appended to `seq` as children 0, 1, 2.
void append_conv_bn_relu(nn::Sequential& seq, int64_t in, int64_t out, int64_t kernel,
                         int64_t dilation = 1) {
  const int64_t pad = kernel / 2 * dilation;
  seq.push_back(conv(in, out, kernel, {.padding = pad, .dilation = dilation, .bias = false}));
  seq.push_back(std::make_shared<nn::BatchNorm2d>(out));
  seq.push_back(std::make_shared<nn::ReLU>());
}

Tensor upsample_to(const Tensor& x, const Tensor& like) {
  return ops::upsample(x, {like.size(2), like.size(3)}, {.mode = ops::InterpMode::bilinear});
}

}  // namespace

ASPPConv::ASPPConv(int64_t in_channels, int64_t out_channels, int64_t dilation) {
  TCV_CHECK(dilation > 0, "[ASPPConv] atrous rate must be positive, got ", dilation);
  append_conv_bn_relu(*this, in_channels, out_channels, 3, dilation);
}

ASPPPooling::ASPPPooling(int64_t in_channels, int64_t out_channels) {
  push_back(std::make_shared<nn::AdaptiveAvgPool2d>(1));
  push_back(conv(in_channels, out_channels, 1));
  push_back(std::make_shared<nn::BatchNorm2d>(out_channels));
  push_back(std::make_shared<nn::ReLU>());
}

Tensor ASPPPooling::forward(const Tensor& x) {
  return upsample_to(nn::Sequential::forward(x), x);  // (N, out, 1, 1) -> (N, out, H, W)
}

ASPP::ASPP(int64_t in_channels, const std::vector<int64_t>& atrous_rates, int64_t out_channels) {
  TCV_CHECK(!atrous_rates.empty(), "[ASPP] needs at least one atrous rate");
  convs = register_module("convs", std::make_shared<ModuleList>());
  auto branch = std::make_shared<nn::Sequential>();
  append_conv_bn_relu(*branch, in_channels, out_channels, 1);
  convs->push_back(branch);
  for (int64_t rate : atrous_rates)
    convs->push_back(std::make_shared<ASPPConv>(in_channels, out_channels, rate));
  convs->push_back(std::make_shared<ASPPPooling>(in_channels, out_channels));
  project = register_module("project", std::make_shared<nn::Sequential>());
  append_conv_bn_relu(*project, static_cast<int64_t>(convs->size()) * out_channels, out_channels,
                      1);
  project->push_back(std::make_shared<nn::Dropout>(0.5));
}

Tensor ASPP::forward(const Tensor& x) {
  std::vector<Tensor> branches;  // each (N, out, H, W)
  branches.reserve(convs->size());
  for (size_t i = 0; i < convs->size(); ++i) branches.push_back((*convs)[i]->forward(x));
  return project->forward(ops::cat(branches, 1));
}

DeepLabHead::DeepLabHead(int64_t in_channels, int64_t num_classes,
                         const std::vector<int64_t>& atrous_rates, int64_t channels) {
  push_back(std::make_shared<ASPP>(in_channels, atrous_rates, channels));
  append_conv_bn_relu(*this, channels, channels, 3);
  push_back(std::make_shared<nn::Conv2d>(channels, num_classes, 1));
}

FCNHead::FCNHead(int64_t in_channels, int64_t num_classes, FCNHeadOptions opts) {
  const int64_t inter = opts.channels > 0 ? opts.channels : in_channels / 4;
  TCV_CHECK(inter > 0, "[FCNHead] ", in_channels, " input channels leave no hidden channels");
  append_conv_bn_relu(*this, in_channels, inter, 3);
  if (opts.dropout_kind == DropoutKind::channel)
    push_back(std::make_shared<nn::Dropout2d>(opts.dropout));
  else
    push_back(std::make_shared<nn::Dropout>(opts.dropout));
  push_back(std::make_shared<nn::Conv2d>(inter, num_classes, 1));
}

PyramidPooling::PyramidPooling(int64_t in_channels, const std::vector<int64_t>& bins,
                               int64_t out_channels)
    : output_channels_(in_channels + static_cast<int64_t>(bins.size()) * out_channels) {
  TCV_CHECK(!bins.empty(), "[PyramidPooling] needs at least one bin size");
  stages = register_module("stages", std::make_shared<ModuleList>());
  for (int64_t b : bins) {
    TCV_CHECK(b > 0, "[PyramidPooling] bin sizes must be positive, got ", b);
    auto stage = std::make_shared<nn::Sequential>();
    stage->push_back(std::make_shared<nn::AdaptiveAvgPool2d>(b));
    append_conv_bn_relu(*stage, in_channels, out_channels, 1);
    stages->push_back(stage);
  }
}

Tensor PyramidPooling::forward(const Tensor& x) {
  std::vector<Tensor> parts{x};  // x (N, in, H, W), then each stage (N, out, H, W)
  parts.reserve(stages->size() + 1);
  for (size_t i = 0; i < stages->size(); ++i)
    parts.push_back(upsample_to((*stages)[i]->forward(x), x));
  return ops::cat(parts, 1);
}

PSPHead::PSPHead(int64_t in_channels, int64_t num_classes, const std::vector<int64_t>& bins,
                 int64_t channels) {
  auto ppm = std::make_shared<PyramidPooling>(in_channels, bins, channels);
  const int64_t cat_channels = ppm->output_channels();
  push_back(ppm);
  append_conv_bn_relu(*this, cat_channels, channels, 3);
  push_back(std::make_shared<nn::Dropout2d>(0.1));
  push_back(std::make_shared<nn::Conv2d>(channels, num_classes, 1));
}

// ---- TorchCV's PSPNet

namespace {

/// ModuleHelper.BNReLU(n, norm_type="batchnorm"): Sequential(BatchNorm2d(n), ReLU()).
std::shared_ptr<nn::Sequential> bn_relu(int64_t channels) {
  auto s = std::make_shared<nn::Sequential>();
  s->push_back(std::make_shared<nn::BatchNorm2d>(channels));
  s->push_back(std::make_shared<nn::ReLU>());
  return s;
}

}  // namespace

ConvBNReLUBlock::ConvBNReLUBlock(int64_t in_channels, int64_t out_channels, int64_t kernel,
                                 int64_t padding) {
  conv = register_module(
      "conv", seg::conv(in_channels, out_channels, kernel, {.padding = padding, .bias = false}));
  bn_relu = register_module("bn_relu", seg::bn_relu(out_channels));
}

Tensor ConvBNReLUBlock::forward(const Tensor& x) {
  return bn_relu->forward(conv->forward(x));
}

PPMBilinearDeepsup::PPMBilinearDeepsup(int64_t in_channels, const std::vector<int64_t>& bins,
                                       int64_t out_channels) {
  TCV_CHECK(!bins.empty(), "[PPMBilinearDeepsup] needs at least one bin size");
  ppm = register_module("ppm", std::make_shared<ModuleList>());
  for (int64_t b : bins) {
    TCV_CHECK(b > 0, "[PPMBilinearDeepsup] bin sizes must be positive, got ", b);
    auto stage = std::make_shared<nn::Sequential>();
    stage->push_back(std::make_shared<nn::AdaptiveAvgPool2d>(b));
    stage->push_back(conv(in_channels, out_channels, 1));
    stage->push_back(bn_relu(out_channels));
    ppm->push_back(stage);
  }
}

Tensor PPMBilinearDeepsup::forward(const Tensor& x) {
  std::vector<Tensor> parts{x};  // x (N, in, H, W), then each bin (N, out, H, W)
  parts.reserve(ppm->size() + 1);
  for (size_t i = 0; i < ppm->size(); ++i)
    parts.push_back(upsample_to((*ppm)[i]->forward(x), x));  // align_corners=False
  return ops::cat(parts, 1);
}

std::shared_ptr<nn::Sequential> torchcv_dsn_head(int64_t in_channels, int64_t hidden,
                                                 int64_t num_classes) {
  auto s = std::make_shared<nn::Sequential>();
  s->push_back(std::make_shared<ConvBNReLUBlock>(in_channels, hidden, 3, 1));
  s->push_back(std::make_shared<nn::Dropout2d>(0.1));
  s->push_back(std::make_shared<nn::Conv2d>(hidden, num_classes, 1));
  return s;
}

std::shared_ptr<nn::Sequential> torchcv_psp_cls_head(int64_t in_channels, int64_t channels,
                                                     int64_t num_classes) {
  auto s = std::make_shared<nn::Sequential>();
  s->push_back(conv(in_channels, channels, 3, {.padding = 1, .bias = false}));
  s->push_back(bn_relu(channels));
  s->push_back(std::make_shared<nn::Dropout2d>(0.1));
  s->push_back(std::make_shared<nn::Conv2d>(channels, num_classes, 1));
  return s;
}

}  // namespace tcv::models::seg
