#include "models/det/ssd.h"

#include "engine/ops.h"
#include "models/registry.h"

namespace tcv::models::det {

namespace {

using nn::Conv2d;
using nn::Conv2dOptions;
using nn::MaxPool2d;
using nn::Pool2dOptions;
using nn::ReLU;
using nn::Sequential;

std::shared_ptr<Conv2d> conv(int64_t in, int64_t out, int64_t k, Conv2dOptions o = {}) {
  return std::make_shared<Conv2d>(in, out, k, o);
}

std::shared_ptr<ReLU> relu() {
  return std::make_shared<ReLU>();
}

// Appends conv, [BatchNorm,] ReLU to `seq`; with BatchNorm the convolution has no bias.
void conv_relu(Sequential& seq, int64_t in, int64_t out, int64_t k, Conv2dOptions o, SsdNorm norm) {
  if (norm == SsdNorm::batch_norm) o.bias = false;
  seq.push_back(conv(in, out, k, o));
  if (norm == SsdNorm::batch_norm) seq.push_back(std::make_shared<nn::BatchNorm2d>(out));
  seq.push_back(relu());
}

// 1x1 conv to `mid`, ReLU, conv to `out`, ReLU: one extra block.
std::shared_ptr<Sequential> extra_block(int64_t in, int64_t mid, int64_t out, int64_t k,
                                        int64_t stride, int64_t pad, SsdNorm norm) {
  auto b = std::make_shared<Sequential>();
  conv_relu(*b, in, mid, 1, {}, norm);
  conv_relu(*b, mid, out, k, {.stride = stride, .padding = pad}, norm);
  return b;
}

void xavier_init(nn::Module& m) {
  for (auto& [name, sub] : m.named_modules())
    if (auto* c = dynamic_cast<Conv2d*>(sub)) {
      nn::init::xavier_uniform_(c->weight);
      if (c->bias.defined()) nn::init::zeros_(c->bias);
    }
}

// Output size of a convolution or pooling window along one dim, as PyTorch.
int64_t window_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const int64_t span = in + 2 * p - d * (k - 1) - 1;
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

// Spatial size after running module m on an input of size hw.
std::array<int64_t, 2> spatial_out(const nn::Module& m, std::array<int64_t, 2> hw) {
  if (const auto* c = dynamic_cast<const Conv2d*>(&m)) {
    const auto& o = c->options;
    return {window_out(hw[0], c->kernel_size.h, o.stride.h, o.padding.h, o.dilation.h, false),
            window_out(hw[1], c->kernel_size.w, o.stride.w, o.padding.w, o.dilation.w, false)};
  }
  if (const auto* p = dynamic_cast<const MaxPool2d*>(&m)) {
    const auto& o = p->options;
    return {window_out(hw[0], p->kernel_size.h, o.stride.h, o.padding.h, 1, o.ceil_mode),
            window_out(hw[1], p->kernel_size.w, o.stride.w, o.padding.w, 1, o.ceil_mode)};
  }
  for (const auto& [name, child] : m.named_children()) hw = spatial_out(*child, hw);
  return hw;
}

}  // namespace

// ------------------------------------------------------------------ backbone

SsdBackbone::SsdBackbone(SsdVariant variant, int64_t in_channels, int64_t width_divisor,
                         SsdNorm norm)
    : div_(width_divisor) {
  TCV_CHECK(div_ >= 1 && 64 % div_ == 0, "[SSD] width_divisor must divide 64, got ", div_);
  auto w = [&](int64_t c) { return c / div_; };
  scale_weight = register_parameter("scale_weight", full({w(512)}, 20.0));
  // torchvision's VGG-16 features up to relu4_3 (indices 0..22), pool3 in ceil mode.
  features = register_module("features", std::make_shared<Sequential>());
  const int64_t cfg[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512};
  int64_t in = in_channels, pools = 0;
  for (int64_t v : cfg) {
    if (v == 0) {
      features->push_back(
          std::make_shared<MaxPool2d>(2, Pool2dOptions{.stride = 2, .ceil_mode = ++pools == 3}));
      continue;
    }
    conv_relu(*features, in, w(v), 3, {.padding = 1}, norm);
    in = w(v);
  }
  extra = register_module("extra", std::make_shared<Sequential>());
  // Block 0: pool4, conv5_1..conv5_3, then pool5 3x3/1/1, conv6 (dilation 6), conv7.
  auto fc = std::make_shared<Sequential>(std::initializer_list<nn::ModulePtr>{
      std::make_shared<MaxPool2d>(3, Pool2dOptions{.stride = 1, .padding = 1})});
  conv_relu(*fc, w(512), w(1024), 3, {.padding = 6, .dilation = 6}, norm);
  conv_relu(*fc, w(1024), w(1024), 1, {}, norm);
  auto block0 = std::make_shared<Sequential>(std::initializer_list<nn::ModulePtr>{
      std::make_shared<MaxPool2d>(2, Pool2dOptions{.stride = 2})});
  for (int i = 0; i < 3; ++i) conv_relu(*block0, w(512), w(512), 3, {.padding = 1}, norm);
  block0->push_back(fc);
  extra->push_back(block0);
  extra->push_back(extra_block(w(1024), w(256), w(512), 3, 2, 1, norm));  // conv8_2
  extra->push_back(extra_block(w(512), w(128), w(256), 3, 2, 1, norm));   // conv9_2
  if (variant == SsdVariant::ssd300) {
    extra->push_back(extra_block(w(256), w(128), w(256), 3, 1, 0, norm));  // conv10_2
    extra->push_back(extra_block(w(256), w(128), w(256), 3, 1, 0, norm));  // conv11_2
  } else {
    // SSD512 (TorchCV): two more stride-2 blocks, then a 2x2 convolution to 1x1.
    extra->push_back(extra_block(w(256), w(128), w(256), 3, 2, 1, norm));  // conv10_2
    extra->push_back(extra_block(w(256), w(128), w(256), 3, 2, 1, norm));  // conv11_2
    extra->push_back(extra_block(w(256), w(128), w(256), 2, 1, 0, norm));  // conv12_2
  }
}

std::vector<Tensor> SsdBackbone::features_of(const Tensor& x) {
  Tensor h = features->forward(x);  // conv4_3 after ReLU
  std::vector<Tensor> out{nn::l2_norm(h, scale_weight)};
  for (size_t i = 0; i < extra->size(); ++i) {
    h = (*extra)[i]->forward(h);
    out.push_back(h);
  }
  return out;
}

Tensor SsdBackbone::forward(const Tensor& x) {
  return features_of(x).back();
}

std::vector<int64_t> SsdBackbone::out_channels() const {
  std::vector<int64_t> c{512, 1024, 512, 256, 256, 256};
  if (extra->size() == 6) c.push_back(256);
  for (auto& v : c) v /= div_;
  return c;
}

std::vector<std::array<int64_t, 2>> SsdBackbone::feature_sizes(int64_t h, int64_t w) const {
  std::array<int64_t, 2> hw = spatial_out(*features, {h, w});
  std::vector<std::array<int64_t, 2>> out{hw};
  for (size_t i = 0; i < extra->size(); ++i) {
    hw = spatial_out(*(*extra)[i], hw);
    out.push_back(hw);
  }
  return out;
}

// ------------------------------------------------------------------ heads

SsdScoringHead::SsdScoringHead(const std::vector<int64_t>& in_channels,
                               const std::vector<int64_t>& anchors, int64_t columns_)
    : columns(columns_) {
  module_list = register_module("module_list", std::make_shared<Sequential>());
  for (size_t k = 0; k < in_channels.size(); ++k)
    module_list->push_back(conv(in_channels[k], columns * anchors[k], 3, {.padding = 1}));
}

Tensor SsdScoringHead::forward_maps(const std::vector<Tensor>& maps) {
  TCV_CHECK(maps.size() == module_list->size(), "[SSDScoringHead] ", maps.size(),
            " feature maps for ", module_list->size(), " convolutions");
  std::vector<Tensor> parts;
  for (size_t k = 0; k < maps.size(); ++k) {
    const Tensor r = (*module_list)[k]->forward(maps[k]);  // (N, A·K, H, W)
    const int64_t n = r.size(0), h = r.size(2), w = r.size(3), a = r.size(1) / columns;
    // (N, A, K, H, W) -> (N, H, W, A, K) -> (N, H·W·A, K)
    parts.push_back(
        r.view({n, a, columns, h, w}).permute({0, 3, 4, 1, 2}).reshape({n, h * w * a, columns}));
  }
  return ops::cat(parts, 1);
}

Tensor SsdScoringHead::forward(const Tensor& x) {
  return forward_maps({x});
}

SsdHead::SsdHead(const std::vector<int64_t>& in_channels, const std::vector<int64_t>& anchors,
                 int64_t num_classes) {
  classification_head = register_module(
      "classification_head", std::make_shared<SsdScoringHead>(in_channels, anchors, num_classes));
  regression_head =
      register_module("regression_head", std::make_shared<SsdScoringHead>(in_channels, anchors, 4));
}

Tensor SsdHead::forward(const Tensor& x) {
  return ops::cat({regression_head->forward(x), classification_head->forward(x)}, 2);
}

// ------------------------------------------------------------------ SSD

SSD::SSD(SsdVariant v, SsdOptions opts) : variant(v), options(std::move(opts)) {
  TCV_CHECK(options.num_classes >= 2, "[SSD] num_classes counts the background and at least ",
            "one object class, got ", options.num_classes);
  TCV_CHECK(options.in_channels > 0, "[SSD] in_channels must be positive, got ",
            options.in_channels);
  if (options.anchors.aspect_ratios.empty())
    options.anchors = v == SsdVariant::ssd300 ? ssd300_anchor_options() : ssd512_anchor_options();
  backbone = register_module(
      "backbone",
      std::make_shared<SsdBackbone>(v, options.in_channels, options.width_divisor, options.norm));
  const std::vector<int64_t> channels = backbone->out_channels();
  TCV_CHECK(options.anchors.aspect_ratios.size() == channels.size(), "[SSD] ", channels.size(),
            " feature maps but anchor.aspect_ratio_list has ", options.anchors.aspect_ratios.size(),
            " entries");
  std::vector<int64_t> anchors;
  for (size_t k = 0; k < channels.size(); ++k)
    anchors.push_back(anchors_per_location(options.anchors, k));
  head = register_module("head", std::make_shared<SsdHead>(channels, anchors, options.num_classes));
  if (!options.init_weights) return;
  // torchvision: vgg16() initialises its convolutions kaiming_normal_(fan_out,
  // relu) with zero bias; SSD then re-initialises fc6/fc7, the extra blocks and
  // the heads with xavier_uniform_ and zero bias.
  nn::init::init_cnn_weights(*backbone->features);
  auto block0 = backbone->extra->at<Sequential>(0);
  for (size_t i = 0; i + 1 < block0->size(); ++i) nn::init::init_cnn_weights(*(*block0)[i]);
  xavier_init(*(*block0)[block0->size() - 1]);
  for (size_t i = 1; i < backbone->extra->size(); ++i) xavier_init(*(*backbone->extra)[i]);
  xavier_init(*head);
}

SsdOutput SSD::forward_heads(const Tensor& x) {
  TCV_CHECK(x.dim() == 4 && x.size(1) == options.in_channels, "[SSD] expects input (N, ",
            options.in_channels, ", H, W), got ", x.shape_str());
  for (const auto& s : backbone->feature_sizes(x.size(2), x.size(3)))
    TCV_CHECK(s[0] > 0 && s[1] > 0, "[SSD] input ", x.shape_str(),
              " is too small for the extra blocks");
  const std::vector<Tensor> maps = backbone->features_of(x);
  return {head->regression_head->forward_maps(maps), head->classification_head->forward_maps(maps)};
}

Tensor SSD::forward(const Tensor& x) {
  const SsdOutput o = forward_heads(x);
  return ops::cat({o.loc, o.conf}, 2);
}

Tensor SSD::default_boxes(int64_t h, int64_t w, Device device) {
  const DType dtype = backbone->scale_weight.dtype() == DType::f64 ? DType::f64 : DType::f32;
  if (cached_.h != h || cached_.w != w || cached_.device != device || cached_.dtype != dtype ||
      !cached_.boxes.defined()) {
    const auto sizes = backbone->feature_sizes(h, w);
    for (const auto& s : sizes)
      TCV_CHECK(s[0] > 0 && s[1] > 0, "[SSD] input (", h, ", ", w,
                ") is too small for the extra blocks");
    cached_ = {h, w, device, dtype,
               det::default_boxes(options.anchors, sizes, {h, w}, dtype).to(device)};
  }
  return cached_.boxes;
}

std::shared_ptr<SSD> ssd300_vgg16(SsdOptions opts) {
  return std::make_shared<SSD>(SsdVariant::ssd300, std::move(opts));
}

std::shared_ptr<SSD> ssd512_vgg16(SsdOptions opts) {
  return std::make_shared<SSD>(SsdVariant::ssd512, std::move(opts));
}

std::shared_ptr<SSD> ssd300_lite(SsdOptions opts) {
  opts.width_divisor = 4;
  opts.norm = SsdNorm::batch_norm;
  return std::make_shared<SSD>(SsdVariant::ssd300, std::move(opts));
}

void register_ssd_models() {
  register_family_models<SSD, SsdOptions>(
      "det", {.num_classes = 21, .in_channels = 3},
      {{"ssd300", ssd300_vgg16,
        "SSD300 on VGG-16 (detection, 300x300 input, 8,732 default boxes; the classes include "
        "the background); torchvision's ssd300_vgg16 architecture and names"},
       {"ssd512", ssd512_vgg16,
        "SSD512 on VGG-16 (detection, 512x512 input, 24,564 default boxes on 7 maps); the SSD "
        "paper's extra blocks as TorchCV, torchvision's names"},
       {"ssd300_lite", ssd300_lite,
        "SSD300 with a quarter of VGG-16's channels and BatchNorm (detection, 300x300 input, "
        "8,732 default boxes, about 1/16 of SSD300's FLOPs), for CPUs and small data sets"}});
}

}  // namespace tcv::models::det
