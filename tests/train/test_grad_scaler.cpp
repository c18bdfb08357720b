// GradScaler: unscaling, skipping steps with inf/NaN gradients, backoff and
// growth of the scale, and that a clean scaled step equals an unscaled one.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "engine/ops.h"
#include "support/gradcheck.h"
#include "train/grad_scaler.h"

namespace tcv::train {
namespace {

nn::StateDict one_param(double value) {
  Tensor p = full({3}, value);
  p.set_requires_grad(true);
  return {{"w", p}};
}

TEST(GradScaler, CleanStepMatchesUnscaledStep) {
  auto pa = one_param(1.0), pb = one_param(1.0);
  SGD a(pa, {.lr = 0.1, .momentum = 0.9}), b(pb, {.lr = 0.1, .momentum = 0.9});
  GradScaler scaler({.init_scale = 1024.0});
  Tensor x = testing::lit({0.5, -2.0, 3.0}, {3}, DType::f32);
  for (int i = 0; i < 3; ++i) {
    a.zero_grad();
    ops::sum(ops::mul(ops::square(pa[0].second), x)).backward();
    a.step();
    b.zero_grad();
    scaler.scale(ops::sum(ops::mul(ops::square(pb[0].second), x))).backward();
    EXPECT_TRUE(scaler.step(b));
  }
  testing::expect_close(pb[0].second, pa[0].second, 1e-6, 1e-6);
  EXPECT_EQ(scaler.skipped_steps(), 0);
  EXPECT_EQ(scaler.get_scale(), 1024.0);
}

TEST(GradScaler, SkipsNonFiniteStepsAndBacksOff) {
  auto p = one_param(2.0);
  SGD opt(p, {.lr = 0.1});
  GradScaler scaler(
      {.init_scale = 8.0, .growth_factor = 2.0, .backoff_factor = 0.5, .growth_interval = 2});
  for (double bad :
       {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    opt.zero_grad();
    Tensor w = testing::lit({1.0, bad, 1.0}, {3}, DType::f32);
    scaler.scale(ops::sum(ops::mul(p[0].second, w))).backward();
    EXPECT_FALSE(scaler.step(opt));
  }
  testing::expect_close(p[0].second, full({3}, 2.0), 0, 0, "no update on skipped steps");
  EXPECT_EQ(scaler.skipped_steps(), 2);
  EXPECT_EQ(scaler.get_scale(), 2.0);  // 8 · 0.5 · 0.5
  // Two clean steps in a row double it.
  for (int i = 0; i < 2; ++i) {
    opt.zero_grad();
    scaler.scale(ops::sum(p[0].second)).backward();
    EXPECT_TRUE(scaler.step(opt));
  }
  EXPECT_EQ(scaler.get_scale(), 4.0);
  // Each clean step moved w by lr · 1 (the unscaled gradient of sum).
  testing::expect_close(p[0].second, full({3}, 1.8), 1e-6, 1e-6);
}

TEST(GradScaler, RejectsBadOptions) {
  EXPECT_NE(testing::error_of([] { GradScaler s({.init_scale = 0.0}); }).find("init_scale"),
            std::string::npos);
}

}  // namespace
}  // namespace tcv::train
