// Segmentation golden files as scripts/make_golden_seg.py's golden_step writes
// them (torchvision's DeepLabV3, TorchCV's PSPNet): the target formula, the
// file's tensors under a model prefix, and the checks every such test makes
// (input and target samples, both outputs in eval and training mode, the
// three losses, running statistics and gradients), remembering the worst
// relative errors for the test's summary line.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "engine/ops.h"
#include "engine/serialize.h"
#include "models/seg/segmentation.h"
#include "support/golden_model.h"
#include "support/gradcheck.h"

namespace tcv::testing {

/// The scripts' target: (3n + 5y + 7x) mod classes, 255 where (x + 2y + n) mod 11 == 0.
inline Tensor golden_seg_target(int64_t n, int64_t h, int64_t w, int64_t classes) {
  std::vector<int64_t> v;
  v.reserve(static_cast<size_t>(n * h * w));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        v.push_back((x + 2 * y + b) % 11 == 0 ? 255 : (3 * b + 5 * y + 7 * x) % classes);
  return from_vector<int64_t>(v, {n, h, w});
}

/// One golden file (relative to the source tree) and the prefix of its model's tensors.
class SegGolden {
 public:
  SegGolden(std::string file, std::string prefix, double tol)
      : file_(std::move(file)), prefix_(std::move(prefix)), tol_(tol) {
    for (auto& [name, t] : load_safetensors(source_dir() + file_).tensors) tensors_[name] = t;
  }

  const std::map<std::string, Tensor>& tensors() const { return tensors_; }
  double worst_output() const { return worst_output_; }
  double worst_grad() const { return worst_grad_; }

  /// EXPECTs `actual` within the tolerance of the tensor prefix + key.
  void expect_matches(const std::vector<double>& actual, const std::string& key) {
    const auto it = tensors_.find(prefix_ + key);
    ASSERT_NE(it, tensors_.end()) << "golden tensor \"" << prefix_ << key << "\" missing from "
                                  << file_;
    const double err = golden_rel_error(actual, it->second.to_vector<double>());
    double& worst = key.rfind("grad", 0) == 0 ? worst_grad_ : worst_output_;
    worst = std::max(worst, err);
    if (std::getenv("TCV_GOLDEN_VERBOSE")) std::printf("%-50s %.3g\n", key.c_str(), err);
    EXPECT_LT(err, tol_) << key;
  }

  /// The input's every 97th value and the target's sample.
  void expect_inputs(const Tensor& x, const Tensor& target) {
    std::vector<double> input_sample;
    const std::vector<double> flat = x.to_vector<double>();
    for (size_t i = 0; i < flat.size(); i += 97) input_sample.push_back(flat[i]);
    expect_matches(input_sample, "input_sample");
    expect_matches(golden_sample(target.to(DType::f64)), "target_sample");
  }

  /// Both outputs of `model` on x in eval mode (autograd off); leaves it in eval mode.
  void expect_eval(models::seg::SegmentationModel& model, const Tensor& x) {
    model.eval();
    NoGradGuard no_grad;
    const models::seg::SegOutput o = model.forward_seg(x);
    expect_matches(golden_sample(o.out), "eval.out");
    expect_matches(golden_sample(o.aux), "eval.aux");
  }

  /// A training forward's outputs and losses (out, aux, total).
  void expect_train(const models::seg::SegOutput& o, const Tensor& loss_out, const Tensor& loss_aux,
                    const Tensor& loss) {
    expect_matches(golden_sample(o.out.detach()), "train.out");
    expect_matches(golden_sample(o.aux.detach()), "train.aux");
    expect_matches({loss_out.item()}, "train.loss_out");
    expect_matches({loss_aux.item()}, "train.loss_aux");
    expect_matches({loss.item()}, "train.loss");
  }

  /// Every running statistic the file holds ("stat." keys); returns how many.
  int expect_stats(nn::Module& model) {
    std::map<std::string, Tensor> state;
    for (auto& [name, t] : model.state_dict()) state[name] = t;
    return for_each_key("stat.", [&](const std::string& name) {
      EXPECT_TRUE(state.count(name)) << name;
      if (state.count(name)) expect_matches(golden_sample(state[name]), "stat." + name);
    });
  }

  /// Every gradient the file holds ("grad." keys: samples and L2 norms, the
  /// norm taken in f64); returns how many.
  int expect_grads(nn::Module& model) {
    std::map<std::string, Tensor> params;
    for (auto& [name, t] : model.named_parameters()) params[name] = t;
    return for_each_key("grad.", [&](const std::string& name) {
      const Tensor g = params.count(name) ? params[name].grad() : Tensor();
      EXPECT_TRUE(g.defined()) << name;
      if (!g.defined()) return;
      expect_matches(golden_sample(g), "grad." + name);
      expect_matches({ops::sqrt(ops::sum(ops::square(g.to(DType::f64)))).item()},
                     "grad_norm." + name);
    });
  }

 private:
  template <typename F>
  int for_each_key(const std::string& kind, F fn) {
    int n = 0;
    const std::string p = prefix_ + kind;
    for (const auto& [key, t] : tensors_)
      if (key.rfind(p, 0) == 0) {
        fn(key.substr(p.size()));
        ++n;
      }
    return n;
  }

  std::string file_, prefix_;
  double tol_;
  std::map<std::string, Tensor> tensors_;
  double worst_output_ = 0, worst_grad_ = 0;
};

}  // namespace tcv::testing
