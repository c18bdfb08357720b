// SSD300 and its MultiBox loss against torchvision 0.14's: the golden file
// tests/data/golden/det_ssd.safetensors was written by
// scripts/make_golden_det.py with PyTorch computing in f64 on f32 closed-form
// weights, inputs, head outputs and targets, which are repeated here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/serialize.h"
#include "models/det/multibox_loss.h"
#include "models/det/ssd.h"
#include "support/golden_formula.h"
#include "support/golden_model.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

using models::det::DetTarget;
using testing::golden_seed;
using testing::golden_uniform;

const SafetensorsFile& golden_file() {
  static const SafetensorsFile f =
      load_safetensors(testing::source_dir() + "/tests/data/golden/det_ssd.safetensors");
  return f;
}

const Tensor& golden_tensor(const std::string& name) {
  return testing::golden_file_tensor("tests/data/golden/det_ssd.safetensors", name);
}

// ---- the closed forms of scripts/make_golden_det.py ----

Tensor formula(const Shape& shape, int64_t seed, double lo, double hi, DType dt) {
  const int64_t n = shape_numel(shape);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = static_cast<float>(lo + (hi - lo) * golden_uniform(i, seed));
  return from_vector<float>(v, shape).to(dt);
}

std::vector<DetTarget> formula_targets(int64_t images, DType dt) {
  // The script picks the seed base whose matches have no near-ties.
  const int64_t base = std::stoll(golden_file().metadata.at("targets.seed"));
  std::vector<DetTarget> out;
  for (int64_t b = 0; b < images; ++b) {
    const int64_t n = 2 + 3 * b;
    std::vector<float> boxes;
    std::vector<int64_t> labels;
    for (int64_t k = 0; k < n; ++k) {
      double v[4];
      for (int j = 0; j < 4; ++j) v[j] = golden_uniform(8 * k + j, base + b);
      const double x1 = 240.0 * v[0], y1 = 240.0 * v[1];
      const double x2 = x1 + 12.0 + (288.0 - x1 - 12.0) * v[2];
      const double y2 = y1 + 12.0 + (288.0 - y1 - 12.0) * v[3];
      for (double c : {x1, y1, x2, y2}) boxes.push_back(static_cast<float>(c));
      labels.push_back(1 + (7 * k + 3 * b) % 20);
    }
    out.push_back({from_vector<float>(boxes, {n, 4}).to(dt), from_vector<int64_t>(labels)});
  }
  return out;
}

void set_formula_weights(nn::Module& m) {
  NoGradGuard no_grad;
  for (auto& [name, t] : m.state_dict()) {
    const int64_t n = t.numel(), s = golden_seed(name);
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const double r = 2.0 * golden_uniform(i, s) - 1.0;
      double x;
      if (t.dim() >= 2)
        x = std::sqrt(6.0 / static_cast<double>(n / t.size(0))) * r;
      else if (name.size() >= 6 && name.substr(name.size() - 6) == "weight")
        x = 1.0 + 0.2 * r;
      else
        x = 0.1 * r;
      v[static_cast<size_t>(i)] = static_cast<float>(x);
    }
    t.copy_(from_vector<float>(v, t.shape()));
  }
}

/// Every k-th element, as the script's sample().
std::vector<double> sample(const Tensor& t) {
  const std::vector<double> flat = t.contiguous().to_vector<double>();
  const size_t n = flat.size(), k = n <= 6000 ? 1 : n / 1024 + 1;
  std::vector<double> s;
  for (size_t i = 0; i < n; i += k) s.push_back(flat[i]);
  return s;
}

double norm2(const Tensor& t) {
  double ss = 0;
  for (double e : t.contiguous().to_vector<double>()) ss += e * e;
  return std::sqrt(ss);
}

/// ‖actual − golden‖∞ / ‖golden‖∞, EXPECTed below tol; returned for the summary.
double expect_rel(const std::vector<double>& actual, const std::string& key, double tol) {
  const std::vector<double> want = golden_tensor(key).to_vector<double>();
  EXPECT_EQ(actual.size(), want.size()) << key;
  if (actual.size() != want.size()) return INFINITY;
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(actual[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  const double rel = scale > 0 ? diff / scale : diff;
  EXPECT_LT(rel, tol) << key;
  return rel;
}

// ------------------------------------------------------------------ loss alone

// The loss on closed-form head outputs against torchvision's compute_loss on
// the same values, tcv's f64 against PyTorch's f64 (loss.*) and tcv's f32
// against PyTorch's f32 (loss32.*, whose matches are made from f32 IoUs as
// tcv's are). f64: only the golden file's f32 rounding, 2⁻²⁴ ≈ 6e-8, so 1e-7.
// f32: each term (a smooth-L1 of an encoded box, a cross-entropy over 21
// logits) carries at most ~30 roundings, 30u = 1.8e-6 relative; each loss
// sums K ≈ 120 non-zero terms of one sign (4 per positive for the boxes, the
// positives and 3 negatives per positive for the classes), within λ√K·u =
// 6·11·2⁻²⁴ = 3.9e-6 by the probabilistic bound (Higham and Mary 2019, λ = 6),
// in each implementation: 1e-4 bounds the difference with room. Gradients are
// single terms (a softmax minus one-hot, a clamped difference) over the
// positive count: a few roundings each, 1e-5.
void run_loss_golden(DType dt, const std::string& prefix, double tol_loss, double tol_grad) {
  auto model = models::det::ssd300_vgg16({.num_classes = 21, .init_weights = false});
  const Tensor anchors = model->default_boxes(300, 300);
  Tensor loc = formula({2, 8732, 4}, 11, -1.0, 1.0, dt).set_requires_grad(true);
  Tensor conf = formula({2, 8732, 21}, 13, -2.0, 2.0, dt).set_requires_grad(true);
  const auto targets = formula_targets(2, dt);
  const auto l = models::det::multibox_loss(loc, conf, anchors, targets);
  l.total().backward();
  const std::string what = std::string(" (") + dtype_name(dt) + ")";
  const double rel =
      expect_rel({l.bbox_regression.item(), l.classification.item()}, prefix + ".values", tol_loss);
  // The matches: every (image, anchor, ground truth) torchvision matched.
  const std::vector<int32_t> m = golden_tensor(prefix + ".matches").to_vector<int32_t>();
  std::set<std::tuple<int64_t, int64_t, int64_t>> want, got;
  for (size_t i = 0; i < m.size(); i += 3) want.insert({m[i], m[i + 1], m[i + 2]});
  for (int64_t b = 0; b < 2; ++b) {
    const auto matches =
        ops::ssd_match(ops::box_iou(targets[b].boxes, anchors.to(dt)), 0.5).to_vector<int64_t>();
    for (int64_t a = 0; a < 8732; ++a)
      if (matches[a] >= 0) got.insert({b, a, matches[a]});
  }
  EXPECT_EQ(got, want) << what;
  EXPECT_EQ(l.num_matched, static_cast<int64_t>(want.size())) << what;
  const double gl = expect_rel(sample(loc.grad()), prefix + ".grad.loc", tol_grad);
  const double gc = expect_rel(sample(conf.grad()), prefix + ".grad.conf", tol_grad);
  expect_rel({norm2(loc.grad()), norm2(conf.grad())}, prefix + ".gradnorm", tol_grad);
  std::printf(
      "[ multibox_loss %s ] %zu matched anchors; loss rel diff %.2e, grad loc %.2e, "
      "grad conf %.2e\n",
      dtype_name(dt), want.size(), rel, gl, gc);
}

TEST(SsdGolden, MultiBoxLossF32) {
  run_loss_golden(DType::f32, "loss32", 1e-4, 1e-5);
}

TEST(SsdGolden, MultiBoxLossF64) {
  run_loss_golden(DType::f64, "loss", 1e-7, 1e-7);
}

// ------------------------------------------------------------------ network

// ‖actual − expected‖∞ / ‖expected‖∞ for tcv's f32 network against PyTorch's
// f64 (as tests/models/test_golden.cpp): no useful worst-case bound exists for
// a deep network, so the probabilistic one (Higham and Mary 2019, λ = 6) per
// layer, added over the forward and the mirrored backward pass: 2·L·λ·√n·u
// with L = 24 layers on the longest path (13 VGG convolutions, conv6, conv7, 8
// extra convolutions, a head) and n = 9,216 terms (the heads on conv7's 1024
// channels), 1.6e-3, plus the golden file's f32 rounding. A parameter's
// gradient ends with a longer sum: a convolution's weight gradient adds up
// N·H·W products, 2·300·300 = 180,000 for conv1_1 (an AVX2 CPU's oneDNN left
// 2.2e-3 there), so the parameters' rows take n = 180,000: 7.3e-3.
constexpr double kNetworkTol = 2.0 * 24 * 6.0 * 96.0 * 0x1p-24 + 0x1p-24;
constexpr double kWeightGradTol = 2.0 * 24 * 6.0 * 424.3 * 0x1p-24 + 0x1p-24;  // √180000

TEST(SsdGolden, Ssd300HeadsLossAndGradients) {
  auto model = models::det::ssd300_vgg16({.num_classes = 21});
  set_formula_weights(*model);
  const Tensor x = formula({2, 3, 300, 300}, 7, -1.0, 1.0, DType::f32);
  const auto out = model->forward_heads(x);
  const auto targets = formula_targets(2, DType::f32);
  const auto l =
      models::det::multibox_loss(out.loc, out.conf, model->default_boxes(300, 300), targets);
  // Gradients of the head outputs, read through a hook-free route: backward of
  // the loss alone on detached copies gives them.
  Tensor loc_d = out.loc.detach().set_requires_grad(true);
  Tensor conf_d = out.conf.detach().set_requires_grad(true);
  models::det::multibox_loss(loc_d, conf_d, model->default_boxes(300, 300), targets)
      .total()
      .backward();
  l.total().backward();

  std::vector<std::pair<std::string, double>> rows;
  rows.push_back({"loc", expect_rel(sample(out.loc), "ssd300.loc", kNetworkTol)});
  rows.push_back({"conf", expect_rel(sample(out.conf), "ssd300.conf", kNetworkTol)});
  rows.push_back({"loss", expect_rel({l.bbox_regression.item(), l.classification.item()},
                                     "ssd300.loss", kNetworkTol)});
  rows.push_back({"grad loc", expect_rel(sample(loc_d.grad()), "ssd300.grad.loc", kNetworkTol)});
  rows.push_back({"grad conf", expect_rel(sample(conf_d.grad()), "ssd300.grad.conf", kNetworkTol)});
  std::map<std::string, Tensor> params;
  for (auto& [name, t] : model->named_parameters()) params[name] = t;
  for (const std::string name :
       {"backbone.scale_weight", "backbone.features.0.weight", "backbone.features.21.weight",
        "backbone.extra.0.7.1.weight", "backbone.extra.1.2.weight",
        "head.classification_head.module_list.0.weight",
        "head.classification_head.module_list.2.bias",
        "head.regression_head.module_list.1.weight"}) {
    const Tensor g = params.at(name).grad();
    ASSERT_TRUE(g.defined()) << name;
    EXPECT_GT(norm2(g), 0.0) << name << ": a check of an all-zero gradient would prove nothing";
    rows.push_back({name, expect_rel(sample(g), "ssd300.grad." + name, kWeightGradTol)});
    expect_rel({norm2(g)}, "ssd300.gradnorm." + name, kWeightGradTol);
  }
  double worst = 0;
  for (const auto& [name, rel] : rows) {
    std::printf("[ ssd300 golden ] %-48s rel diff %.2e\n", name.c_str(), rel);
    worst = std::max(worst, rel);
  }
  std::printf("[ ssd300 golden ] largest %.2e (tolerance %.2e, parameters' gradients %.2e)\n",
              worst, kNetworkTol, kWeightGradTol);
}

TEST(SsdGolden, FileIsSmall) {
  const auto size =
      std::filesystem::file_size(testing::source_dir() + "/tests/data/golden/det_ssd.safetensors");
  EXPECT_LT(size, 200u * 1024u);
}

}  // namespace
}  // namespace tcv
