#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "support/tasks.h"
#include "train/config.h"
#include "train/lr_policy.h"

using namespace tcv::train;

namespace {

LrPolicyOptions base(LrPolicyKind k) {
  LrPolicyOptions o;
  o.kind = k;
  o.base_lr = 0.1;
  o.max_iters = 100;
  o.iters_per_unit = 10;  // "epochs" of 10 iterations
  return o;
}

}  // namespace

TEST(LrPolicy, Fixed) {
  LrPolicy p(base(LrPolicyKind::fixed));
  EXPECT_DOUBLE_EQ(p.lr_at(0), 0.1);
  EXPECT_DOUBLE_EQ(p.lr_at(99), 0.1);
}

TEST(LrPolicy, Step) {
  auto o = base(LrPolicyKind::step);
  o.step_size = 3;  // epochs
  o.step_gamma = 0.5;
  LrPolicy p(o);
  EXPECT_DOUBLE_EQ(p.lr_at(0), 0.1);
  EXPECT_DOUBLE_EQ(p.lr_at(29), 0.1);   // epoch 2
  EXPECT_DOUBLE_EQ(p.lr_at(30), 0.05);  // epoch 3
  EXPECT_DOUBLE_EQ(p.lr_at(65), 0.025);
}

TEST(LrPolicy, Multistep) {
  auto o = base(LrPolicyKind::multistep);
  o.stepvalue = {2, 5};
  o.multistep_gamma = 0.1;
  LrPolicy p(o);
  EXPECT_DOUBLE_EQ(p.lr_at(19), 0.1);
  EXPECT_NEAR(p.lr_at(20), 0.01, 1e-15);
  EXPECT_NEAR(p.lr_at(49), 0.01, 1e-15);
  EXPECT_NEAR(p.lr_at(50), 0.001, 1e-15);
  o.iters_per_unit = 1;  // metric "iters": stepvalues are iterations
  EXPECT_NEAR(LrPolicy(o).lr_at(2), 0.01, 1e-15);
}

TEST(LrPolicy, Cosine) {
  LrPolicy p(base(LrPolicyKind::cosine));
  EXPECT_DOUBLE_EQ(p.lr_at(0), 0.1);
  EXPECT_NEAR(p.lr_at(50), 0.05, 1e-15);
  EXPECT_NEAR(p.lr_at(25), 0.05 * (1 + std::cos(std::numbers::pi / 4)), 1e-15);
  EXPECT_NEAR(p.lr_at(100), 0.0, 1e-15);
}

TEST(LrPolicy, LambdaPoly) {
  auto o = base(LrPolicyKind::lambda_poly);
  o.poly_power = 2.0;
  LrPolicy p(o);
  EXPECT_DOUBLE_EQ(p.lr_at(0), 0.1);
  EXPECT_NEAR(p.lr_at(50), 0.025, 1e-15);
  EXPECT_NEAR(p.lr_at(90), 0.001, 1e-15);
}

TEST(LrPolicy, LinearWarmUp) {
  auto o = base(LrPolicyKind::cosine);
  o.warm_iters = 4;
  LrPolicy p(o);
  const double cos1 = 0.05 * (1 + std::cos(std::numbers::pi * 0.01));
  EXPECT_NEAR(p.lr_at(0), 0.1 * 0.25, 1e-15);
  EXPECT_NEAR(p.lr_at(1), cos1 * 0.5, 1e-15);
  EXPECT_NEAR(p.lr_at(3), 0.05 * (1 + std::cos(std::numbers::pi * 0.03)), 1e-15);  // factor 1
  EXPECT_NEAR(p.lr_at(4), 0.05 * (1 + std::cos(std::numbers::pi * 0.04)), 1e-15);
}

TEST(LrPolicy, FromConfig) {
  Config c;
  c.set_override("solver.lr.lr_policy=step");
  c.set_override("solver.lr.base_lr=0.2");
  c.set_override("solver.lr.step.step_size=2");
  c.set_override("solver.lr.is_warm=true");
  c.set_override("solver.lr.warm.warm_iters=10");
  const LrPolicy p = LrPolicy::from_config(c, /*iters_per_epoch=*/50, /*max_iters=*/500);
  EXPECT_NEAR(p.lr_at(4), 0.2 * 0.5, 1e-15);  // warm-up 5/10
  EXPECT_DOUBLE_EQ(p.lr_at(99), 0.2);         // epoch 1
  EXPECT_NEAR(p.lr_at(100), 0.02, 1e-15);     // epoch 2
  c.set_override("solver.lr.metric=iters");
  EXPECT_NEAR(LrPolicy::from_config(c, 50, 500).lr_at(12), 0.2 * std::pow(0.1, 6), 1e-15);
  EXPECT_THROW(parse_lr_policy("linear"), tcv::Error);
}

TEST(LrPolicy, CosineAndPolyPerEpoch) {
  // metric "epoch": the value changes at epoch starts only; 95 iterations of 10
  // per epoch make 10 epochs.
  Config c;
  c.set_override("solver.lr.lr_policy=cosine");
  c.set_override("solver.lr.base_lr=0.2");
  const LrPolicy cos = LrPolicy::from_config(c, /*iters_per_epoch=*/10, /*max_iters=*/95);
  EXPECT_DOUBLE_EQ(cos.lr_at(0), 0.2);
  EXPECT_DOUBLE_EQ(cos.lr_at(9), 0.2);
  EXPECT_NEAR(cos.lr_at(10), 0.1 * (1 + std::cos(std::numbers::pi * 0.1)), 1e-15);
  EXPECT_NEAR(cos.lr_at(59), 0.1 * (1 + std::cos(std::numbers::pi * 0.5)), 1e-15);
  EXPECT_NEAR(cos.lr_at(94), 0.1 * (1 + std::cos(std::numbers::pi * 0.9)), 1e-15);
  c.set_override("solver.lr.lr_policy=poly");  // TorchCV's lambda_poly by its short name
  c.set_override("solver.lr.lambda_poly.power=2.0");
  const LrPolicy poly = LrPolicy::from_config(c, 10, 95);
  EXPECT_NEAR(poly.lr_at(25), 0.2 * 0.8 * 0.8, 1e-15);
  EXPECT_NEAR(poly.lr_at(29), 0.2 * 0.8 * 0.8, 1e-15);
  // metric "iters": every iteration.
  c.set_override("solver.lr.metric=iters");
  EXPECT_NEAR(LrPolicy::from_config(c, 10, 95).lr_at(25), 0.2 * std::pow(1.0 - 25.0 / 95.0, 2.0),
              1e-15);
}

TEST(LrPolicy, WarmUpThenStepAndMultistep) {
  // Warm-up is per iteration whatever the metric; the policy it scales is per epoch.
  auto o = base(LrPolicyKind::multistep);
  o.stepvalue = {2, 5};  // epochs
  o.multistep_gamma = 0.5;
  o.warm_iters = 5;
  LrPolicy p(o);
  EXPECT_NEAR(p.lr_at(0), 0.1 * 0.2, 1e-15);
  EXPECT_NEAR(p.lr_at(3), 0.1 * 0.8, 1e-15);
  EXPECT_DOUBLE_EQ(p.lr_at(5), 0.1);
  EXPECT_DOUBLE_EQ(p.lr_at(19), 0.1);
  EXPECT_DOUBLE_EQ(p.lr_at(20), 0.05);
  EXPECT_DOUBLE_EQ(p.lr_at(49), 0.05);
  EXPECT_DOUBLE_EQ(p.lr_at(50), 0.025);
  auto s = base(LrPolicyKind::step);
  s.step_size = 1;
  s.warm_iters = 20;  // warm-up longer than the first step: both apply
  LrPolicy q(s);
  EXPECT_NEAR(q.lr_at(14), 0.1 * 0.1 * 0.75, 1e-15);
}

TEST(LrPolicy, WarmUpInEpochs) {
  tcv::train::Config c;
  c.set_override("solver.lr.base_lr=0.1");
  c.set_override("solver.lr.is_warm=true");
  c.set_override("solver.lr.warm.warm_iters=3");  // warm_epochs wins
  c.set_override("solver.lr.warm.warm_epochs=2");
  c.validate();
  const auto p = tcv::train::LrPolicy::from_config(c, 5, 100);  // 5 iters per epoch
  EXPECT_NEAR(p.lr_at(0), 0.01, 1e-12);
  EXPECT_NEAR(p.lr_at(4), 0.05, 1e-12);
  EXPECT_NEAR(p.lr_at(9), 0.1, 1e-12);
  EXPECT_NEAR(p.lr_at(10), 0.1, 1e-12);
}
