#include "models/pose/openpose.h"

#include "engine/ops.h"
#include "layers/init.h"
#include "models/registry.h"

namespace tcv::models::pose {

namespace {

using nn::Conv2d;
using nn::Conv2dOptions;
using nn::Sequential;

void conv_relu(Sequential& seq, int64_t in, int64_t out, int64_t k, PoseNorm norm,
               bool relu = true) {
  const bool bn = norm == PoseNorm::batch_norm;
  seq.push_back(std::make_shared<Conv2d>(in, out, k, Conv2dOptions{.padding = k / 2, .bias = !bn}));
  if (bn) seq.push_back(std::make_shared<nn::BatchNorm2d>(out));
  if (relu) seq.push_back(std::make_shared<nn::ReLU>());
}

// TorchCV's _make_layers: convolutions with ReLU between them, none after the last.
std::shared_ptr<Sequential> branch(int64_t in,
                                   const std::vector<std::pair<int64_t, int64_t>>& convs) {
  auto seq = std::make_shared<Sequential>();
  for (size_t i = 0; i < convs.size(); ++i) {
    conv_relu(*seq, in, convs[i].first, convs[i].second, PoseNorm::none, i + 1 < convs.size());
    in = convs[i].first;
  }
  return seq;
}

void normal_init(nn::Module& m) {
  for (auto& [name, sub] : m.named_modules())
    if (auto* c = dynamic_cast<Conv2d*>(sub)) {
      nn::init::normal_(c->weight, 0.0, 0.01);
      if (c->bias.defined()) nn::init::zeros_(c->bias);
    }
}

}  // namespace

OpenPose::OpenPose(OpenPoseOptions opts) : options(std::move(opts)) {
  const int64_t div = options.width_divisor;
  TCV_CHECK(div >= 1 && 64 % div == 0, "[OpenPose] width_divisor must divide 64, got ", div);
  TCV_CHECK(options.paf_channels > 0 && options.heatmap_channels > 0,
            "[OpenPose] paf_channels and heatmap_channels must be positive, got ",
            options.paf_channels, " and ", options.heatmap_channels);
  TCV_CHECK(options.refinement_stages >= 0, "[OpenPose] refinement_stages must be >= 0, got ",
            options.refinement_stages);
  TCV_CHECK(options.refinement_kernel >= 1 && options.refinement_kernel % 2 == 1,
            "[OpenPose] refinement_kernel must be odd and positive, got ",
            options.refinement_kernel);
  TCV_CHECK(options.in_channels > 0, "[OpenPose] in_channels must be positive, got ",
            options.in_channels);
  auto w = [&](int64_t c) { return c / div; };

  // VGG-19 (configuration E) up to relu4_2: torchvision's features.0 .. features.22.
  features = register_module("features", std::make_shared<Sequential>());
  const int64_t cfg[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0, 512, 512};
  int64_t in = options.in_channels;
  for (int64_t v : cfg) {
    if (v == 0) {
      features->push_back(std::make_shared<nn::MaxPool2d>(2, nn::Pool2dOptions{.stride = 2}));
      continue;
    }
    conv_relu(*features, in, w(v), 3, options.norm);
    in = w(v);
  }
  // The CPM adapter (TorchCV's block_0: conv4_3_CPM, conv4_4_CPM, both with ReLU).
  model0 = register_module("model0", std::make_shared<Sequential>());
  conv_relu(*model0, w(512), w(256), 3, PoseNorm::none);
  conv_relu(*model0, w(256), w(128), 3, PoseNorm::none);

  const int64_t c = w(128), paf = options.paf_channels, heat = options.heatmap_channels;
  const int64_t k = options.refinement_kernel;
  for (int64_t s = 0; s <= options.refinement_stages; ++s) {
    std::shared_ptr<Sequential> l1, l2;
    if (s == 0) {
      l1 = branch(c, {{c, 3}, {c, 3}, {c, 3}, {w(512), 1}, {paf, 1}});
      l2 = branch(c, {{c, 3}, {c, 3}, {c, 3}, {w(512), 1}, {heat, 1}});
    } else {
      const int64_t cin = c + paf + heat;
      l1 = branch(cin, {{c, k}, {c, k}, {c, k}, {c, k}, {c, k}, {c, 1}, {paf, 1}});
      l2 = branch(cin, {{c, k}, {c, k}, {c, k}, {c, k}, {c, k}, {c, 1}, {heat, 1}});
    }
    stages.emplace_back(l1, l2);
  }
  // TorchCV's PoseModel registers every PAF branch, then every heatmap branch.
  for (size_t s = 0; s < stages.size(); ++s)
    register_module("model" + std::to_string(s + 1) + "_1", stages[s].first);
  for (size_t s = 0; s < stages.size(); ++s)
    register_module("model" + std::to_string(s + 1) + "_2", stages[s].second);

  if (options.init == PoseInit::torchcv) {
    nn::init::init_cnn_weights(*features);
    normal_init(*model0);
    for (auto& [l1, l2] : stages) {
      normal_init(*l1);
      normal_init(*l2);
    }
  }
}

PoseOutput OpenPose::forward_stages(const Tensor& x) {
  TCV_CHECK(x.dim() == 4 && x.size(1) == options.in_channels, "[OpenPose] input must be (N, ",
            options.in_channels, ", H, W), got ", x.shape_str());
  const Tensor base = model0->forward(features->forward(x));  // (N, 128, H/8, W/8)
  PoseOutput out;
  Tensor h = base;
  for (size_t s = 0; s < stages.size(); ++s) {
    if (s > 0) h = ops::cat({out.pafs.back(), out.heatmaps.back(), base}, 1);
    out.pafs.push_back(stages[s].first->forward(h));
    out.heatmaps.push_back(stages[s].second->forward(h));
  }
  return out;
}

Tensor OpenPose::forward(const Tensor& x) {
  PoseOutput o = forward_stages(x);
  return ops::cat({o.pafs.back(), o.heatmaps.back()}, 1);
}

std::shared_ptr<OpenPose> openpose_vgg19(OpenPoseOptions opts) {
  return std::make_shared<OpenPose>(std::move(opts));
}

std::shared_ptr<OpenPose> openpose_lite(OpenPoseOptions opts) {
  opts.width_divisor = 4;
  opts.norm = PoseNorm::batch_norm;
  opts.refinement_stages = 2;
  return std::make_shared<OpenPose>(std::move(opts));
}

OpenPoseLossTerms openpose_loss(const PoseOutput& out, const Tensor& paf_target,
                                const Tensor& heatmap_target, const Tensor& mask,
                                const OpenPoseLossOptions& opts) {
  const size_t n_stages = out.pafs.size();
  TCV_CHECK(n_stages > 0 && out.heatmaps.size() == n_stages, "[openpose_loss] the output has ",
            out.pafs.size(), " PAF and ", out.heatmaps.size(),
            " heatmap stages; both must be the same positive number");
  auto weight = [&](const std::vector<double>& w, const char* what, size_t s) {
    if (w.empty()) return 1.0;
    TCV_CHECK(w.size() == n_stages, "[openpose_loss] ", what, " has ", w.size(), " weights for ",
              n_stages, " stages");
    return w[s];
  };
  const Tensor& p0 = out.pafs[0];
  const Tensor& h0 = out.heatmaps[0];
  TCV_CHECK(paf_target.shape() == p0.shape(), "[openpose_loss] paf_target must be ", p0.shape_str(),
            " as the PAF outputs, got ", paf_target.shape_str());
  TCV_CHECK(heatmap_target.shape() == h0.shape(), "[openpose_loss] heatmap_target must be ",
            h0.shape_str(), " as the heatmap outputs, got ", heatmap_target.shape_str());
  TCV_CHECK(mask.dim() == 4 && mask.size(0) == p0.size(0) && mask.size(2) == p0.size(2) &&
                mask.size(3) == p0.size(3),
            "[openpose_loss] mask must be (", p0.size(0), ", 1, ", p0.size(2), ", ", p0.size(3),
            "), got ", mask.shape_str());
  const double inv_n = 1.0 / static_cast<double>(p0.size(0));
  // The targets do not change over stages: mask them once.
  const Tensor paf_t = ops::mul(paf_target, mask).detach();
  const Tensor heat_t = ops::mul(heatmap_target, mask).detach();
  OpenPoseLossTerms t;
  for (size_t s = 0; s < n_stages; ++s) {
    const Tensor lp =
        ops::mul(ops::mse_loss(ops::mul(out.pafs[s], mask), paf_t, ops::Reduction::sum), inv_n);
    const Tensor lh = ops::mul(
        ops::mse_loss(ops::mul(out.heatmaps[s], mask), heat_t, ops::Reduction::sum), inv_n);
    const Tensor term = ops::add(ops::mul(lp, weight(opts.paf_weights, "paf_weights", s)),
                                 ops::mul(lh, weight(opts.heatmap_weights, "heatmap_weights", s)));
    t.total = s == 0 ? term : ops::add(t.total, term);
    t.paf = s == 0 ? lp : ops::add(t.paf, lp);
    t.heatmap = s == 0 ? lh : ops::add(t.heatmap, lh);
  }
  return t;
}

void register_openpose_models() {
  // Fixed outputs (38 PAF, 19 heatmap channels: TorchCV's COCO set-up); no
  // classes (0 in the reference options, so the listing names none).
  register_family_models<OpenPose, OpenPoseOptions>(
      "pose", {.num_classes = 0, .in_channels = 3},
      {{"openpose", openpose_vgg19,
        "OpenPose on VGG-19 (pose, output stride 8, 6 stages of 38 PAF + 19 heatmap channels); "
        "torchvision's VGG-19 names for the backbone, TorchCV's for the stages"},
       {"openpose_lite", openpose_lite,
        "OpenPose with a quarter of the channels, BatchNorm in the backbone and 3 stages (pose, "
        "output stride 8, 38 PAF + 19 heatmap channels), for CPUs and small data sets"}});
}

}  // namespace tcv::models::pose
