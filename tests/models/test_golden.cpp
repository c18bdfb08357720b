// Forward outputs and parameter gradients of ResNet-18 (CIFAR stem) and
// MobileNetV2 against PyTorch 1.13's on the same weights and inputs. The golden
// file tests/data/golden/cls_models.safetensors was written by
// scripts/make_golden_cls.py, with PyTorch computing in f64 on f32 weights and
// inputs; those come from closed-form formulas repeated here, so no weights are
// committed and no PyTorch is needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/serialize.h"
#include "models/cls/mobilenet_v2.h"
#include "models/cls/resnet.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

using tcv::testing::source_dir;

// ‖actual − expected‖∞ / ‖expected‖∞ must stay under this: tcv in f32 against
// PyTorch's f64 results (stored as f32). A whole network has no useful
// worst-case bound (γₙ compounded over 20 to 50 layers of up to 4,608-term
// sums), so this is the probabilistic bound (Higham and Mary 2019, Thm 2.8): a
// sum of n products is within λ√n·u·Σ|a||b| of the exact value with probability
// at least 1 − 2n·exp(−λ²/2), here λ = 6. To first order the layers' errors add
// up over the forward pass and the mirrored backward pass: 2·L·λ·√n_max·u, plus
// the golden file's own f32 rounding. ResNet-18 (L = 21 convolutions and
// linear layers, n_max = 512·9) gives 1.0e-3, MobileNetV2 (L = 53, n_max = 960)
// 1.2e-3: both use the larger.
constexpr double f32_network_tolerance(int layers, double sqrt_max_terms) {
  return 2.0 * layers * 6.0 * sqrt_max_terms * 0x1p-24 + 0x1p-24;
}
constexpr double kRelTol = f32_network_tolerance(53, 31.0);  // √960 ≈ 31

const std::map<std::string, Tensor>& golden() {
  static const std::map<std::string, Tensor> g = [] {
    std::map<std::string, Tensor> m;
    for (auto& [name, t] :
         load_safetensors(source_dir() + "/tests/data/golden/cls_models.safetensors").tensors)
      m[name] = t;
    return m;
  }();
  return g;
}

const Tensor& golden_tensor(const std::string& name) {
  auto it = golden().find(name);
  TCV_CHECK(it != golden().end(), "golden tensor \"", name, "\" missing");
  return it->second;
}

// ---- the formulas of scripts/make_golden_cls.py ----

int64_t seed(const std::string& name) {
  int64_t s = 0;
  for (size_t j = 0; j < name.size(); ++j)
    s += static_cast<int64_t>(j + 1) * static_cast<unsigned char>(name[j]);
  return s % 1009;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// u(i, seed) in [0, 1): murmur3's 32-bit finalizer of a Weyl sequence.
double uniform(int64_t i, int64_t s) {
  uint32_t h = static_cast<uint32_t>(i) * 0x9E3779B1u +
               static_cast<uint32_t>(static_cast<uint64_t>(s) * 0x7F4A7C15u + 1u);
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return static_cast<double>(h) / 4294967296.0;
}

std::vector<float> formula_values(const std::string& name, const Tensor& t) {
  const int64_t n = t.numel(), s = seed(name);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double r = 2.0 * uniform(i, s) - 1.0;
    double x;
    if (ends_with(name, "running_mean")) {
      x = 0.1 * r;
    } else if (ends_with(name, "running_var")) {
      x = 1.0 + 0.5 * r;
    } else if (t.dim() >= 2) {
      x = std::sqrt(6.0 / static_cast<double>(n / t.size(0))) * r;
    } else if (ends_with(name, "weight")) {
      x = 1.0 + 0.2 * r;
    } else {
      x = 0.1 * r;
    }
    v[static_cast<size_t>(i)] = static_cast<float>(x);
  }
  return v;
}

void set_formula_weights(nn::Module& m) {
  NoGradGuard no_grad;
  for (auto& [name, t] : m.state_dict()) {
    if (ends_with(name, "num_batches_tracked")) continue;  // stays 0
    t.copy_(from_vector<float>(formula_values(name, t), t.shape()));
  }
}

Tensor formula_input(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = static_cast<float>(2.0 * uniform(i, 7) - 1.0);
  return from_vector<float>(v, shape);
}

/// Every k-th element of the flattened tensor, as the script's sample().
std::vector<double> sample(const Tensor& t) {
  const std::vector<double> flat = t.contiguous().to_vector<double>();
  const size_t n = flat.size();
  const size_t k = n <= 6000 ? 1 : n / 1024 + 1;
  std::vector<double> s;
  for (size_t i = 0; i < n; i += k) s.push_back(flat[i]);
  return s;
}

/// ‖actual − expected‖∞ / ‖expected‖∞, after checking the sizes agree.
double rel_error(const std::vector<double>& actual, const Tensor& expected_t,
                 const std::string& what) {
  const std::vector<double> expected = expected_t.to_vector<double>();
  EXPECT_EQ(actual.size(), expected.size()) << what;
  if (actual.size() != expected.size()) return INFINITY;
  double diff = 0, scale = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    diff = std::max(diff, std::abs(actual[i] - expected[i]));
    scale = std::max(scale, std::abs(expected[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

void expect_matches(const std::vector<double>& actual, const std::string& key,
                    double tol = kRelTol) {
  const double err = rel_error(actual, golden_tensor(key), key);
  EXPECT_LT(err, tol) << key;
}

struct GoldenCase {
  std::string prefix;
  Shape input_shape;
  std::vector<std::string> grads, stats;
  /// The dtype tcv computes in (the golden values are PyTorch's f32 ones).
  DType dtype = DType::f32;
  /// Relative tolerance of every checked tensor.
  double tol = kRelTol;
};

void run_golden(nn::Module& model, const GoldenCase& c) {
  set_formula_weights(model);
  Tensor x = formula_input(c.input_shape);  // (N, 3, H, W)
  if (c.dtype != DType::f32) {
    model.to(c.dtype);
    x = x.to(c.dtype);
  }
  std::vector<int64_t> target;
  for (int64_t n = 0; n < c.input_shape[0]; ++n) target.push_back((3 * n + 1) % 10);
  // The formula itself: every 97th input element equals the script's.
  std::vector<double> input_sample;
  const std::vector<double> flat = x.to_vector<double>();
  for (size_t i = 0; i < flat.size(); i += 97) input_sample.push_back(flat[i]);
  expect_matches(input_sample, c.prefix + ".input_sample", c.tol);

  model.eval();
  {
    NoGradGuard no_grad;
    expect_matches(model.forward(x).to_vector<double>(), c.prefix + ".eval.logits", c.tol);
  }

  model.train();
  const Tensor logits = model.forward(x);  // (N, 10)
  const Tensor loss = ops::cross_entropy(logits, from_vector<int64_t>(target));
  loss.backward();
  expect_matches(logits.to_vector<double>(), c.prefix + ".train.logits", c.tol);
  expect_matches({loss.item()}, c.prefix + ".train.loss", c.tol);

  std::map<std::string, Tensor> state;
  for (auto& [name, t] : model.state_dict()) state[name] = t;
  for (const auto& s : c.stats) {
    ASSERT_TRUE(state.count(s)) << s;
    expect_matches(state[s].to_vector<double>(), c.prefix + ".stat." + s, c.tol);
  }
  std::map<std::string, Tensor> params;
  for (auto& [name, t] : model.named_parameters()) params[name] = t;
  for (const auto& g : c.grads) {
    ASSERT_TRUE(params.count(g)) << g;
    const Tensor grad = params[g].grad();
    ASSERT_TRUE(grad.defined()) << g;
    expect_matches(sample(grad), c.prefix + ".grad." + g, c.tol);
    const auto v = grad.contiguous().to_vector<double>();
    double ss = 0;
    for (double e : v) ss += e * e;
    expect_matches({std::sqrt(ss)}, c.prefix + ".grad_norm." + g, c.tol);
  }
}

// Gradients in f32 are checked only for parameters after the last activation.
// A network has millions of ReLU/ReLU6 inputs, and some always lie within f32
// rounding of a kink (0 or 6): which side they land on depends on the
// summation order of the CPU's kernels, and each flip moves the gradients
// upstream of it by that element's whole contribution — a jump, not a
// rounding error (on an AVX2 build one moved a MobileNetV2 bias gradient by
// 1.4e-3). The forward pass is continuous and is checked in f32; every
// gradient is checked in f64, where nothing lies that close to a kink.
GoldenCase resnet18_case() {
  return {"resnet18_cifar",
          {2, 3, 32, 32},
          {"conv1.weight", "bn1.weight", "bn1.bias", "layer1.0.conv1.weight",
           "layer2.0.downsample.0.weight", "layer3.1.bn1.bias", "layer4.1.conv2.weight",
           "layer4.1.bn2.weight", "fc.weight", "fc.bias"},
          {"bn1.running_mean", "bn1.running_var", "layer4.1.bn2.running_var"}};
}

// Keeps the gradients named by `after_last_activation` (f32 runs).
GoldenCase head_gradients_only(GoldenCase c,
                               const std::vector<std::string>& after_last_activation) {
  c.grads = after_last_activation;
  return c;
}

TEST(Golden, ResNet18CifarMatchesPyTorch) {
  auto model = models::cls::resnet18({.num_classes = 10, .stem = models::cls::ResNetStem::cifar});
  run_golden(*model, head_gradients_only(resnet18_case(), {"fc.weight", "fc.bias"}));
}

TEST(Golden, ResNet18CifarInF64MatchesPyTorch) {
  GoldenCase c = resnet18_case();
  c.dtype = DType::f64;
  c.tol = 1e-6;  // the golden file's f32 rounding is 6e-8
  auto model = models::cls::resnet18({.num_classes = 10, .stem = models::cls::ResNetStem::cifar});
  run_golden(*model, c);
}

GoldenCase mobilenet_case() {
  return {
      "mobilenet_v2",
      {4, 3, 96, 96},
      {"features.0.0.weight", "features.0.1.weight", "features.1.conv.0.0.weight",
       "features.2.conv.0.0.weight", "features.10.conv.1.1.bias", "features.17.conv.2.weight",
       "features.18.0.weight", "features.18.1.bias", "classifier.1.weight", "classifier.1.bias"},
      {"features.0.1.running_var", "features.17.conv.3.running_mean"}};
}

TEST(Golden, MobileNetV2MatchesPyTorch) {
  // Forward values, statistics and the head's gradients within kRelTol of
  // PyTorch's f64 results, on 96x96 inputs (the reference is f64: on these
  // inputs PyTorch's own f32 run flips a ReLU6 kink; see resnet18_case).
  GoldenCase c =
      head_gradients_only(mobilenet_case(), {"classifier.1.weight", "classifier.1.bias"});
  models::cls::MobileNetV2 model({.num_classes = 10, .dropout = 0.0});
  run_golden(model, c);
}

TEST(Golden, MobileNetV2InF64MatchesPyTorch) {
  // The same model in f64 against PyTorch's f64 numbers: every tensor within 1e-6
  // (the golden file's f32 rounding is 6e-8).
  GoldenCase c = mobilenet_case();
  c.dtype = DType::f64;
  c.tol = 1e-6;
  models::cls::MobileNetV2 model({.num_classes = 10, .dropout = 0.0});
  run_golden(model, c);
}

TEST(Golden, FileIsSmall) {
  const auto size =
      std::filesystem::file_size(source_dir() + "/tests/data/golden/cls_models.safetensors");
  EXPECT_LT(size, 300u * 1024u);
  EXPECT_EQ(golden().size(), 53u);
}

}  // namespace
}  // namespace tcv
