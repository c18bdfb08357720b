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
#include "support/golden_model.h"
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

const Tensor& golden_tensor(const std::string& name) {
  return tcv::testing::golden_file_tensor("tests/data/golden/cls_models.safetensors", name);
}

/// ‖actual − expected‖∞ / ‖expected‖∞, after checking the sizes agree.
double rel_error(const std::vector<double>& actual, const Tensor& expected_t,
                 const std::string& what) {
  const std::vector<double> expected = expected_t.to_vector<double>();
  EXPECT_EQ(actual.size(), expected.size()) << what;
  return tcv::testing::golden_rel_error(actual, expected);
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
  tcv::testing::set_golden_weights(model);
  Tensor x = tcv::testing::golden_input(c.input_shape);  // (N, 3, H, W)
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
    expect_matches(tcv::testing::golden_sample(grad), c.prefix + ".grad." + g, c.tol);
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
  EXPECT_EQ(
      load_safetensors(source_dir() + "/tests/data/golden/cls_models.safetensors").tensors.size(),
      53u);
}

}  // namespace
}  // namespace tcv
