// autocast: the guard's scoping and nesting, which tensors the casts touch,
// the config parser, and that backward runs with autocast off.
#include <gtest/gtest.h>

#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

TEST(Autocast, GuardScopesAndNests) {
  EXPECT_FALSE(autocast::enabled());
  {
    autocast::Guard on(true, DType::f16);
    EXPECT_TRUE(autocast::enabled());
    EXPECT_EQ(autocast::dtype(), DType::f16);
    {
      autocast::Guard off(false);
      EXPECT_FALSE(autocast::enabled());
    }
    EXPECT_TRUE(autocast::enabled());
    EXPECT_EQ(autocast::dtype(), DType::f16);
  }
  EXPECT_FALSE(autocast::enabled());
  EXPECT_NE(testing::error_of([] { autocast::Guard g(true, DType::f64); }).find("bf16 or f16"),
            std::string::npos);
}

TEST(Autocast, CastsOnlyFloatingTensorsWhileOn) {
  Tensor f = ones({2, 3});
  Tensor i = ones({2}, {.dtype = DType::i64});
  EXPECT_EQ(autocast::to_low(f).dtype(), DType::f32) << "off: untouched";
  autocast::Guard on(true, DType::bf16);
  EXPECT_EQ(autocast::to_low(f).dtype(), DType::bf16);
  EXPECT_EQ(autocast::to_low(i).dtype(), DType::i64);
  EXPECT_FALSE(autocast::to_low(Tensor()).defined());
  EXPECT_EQ(autocast::to_f32(f.to(DType::bf16)).dtype(), DType::f32);
  EXPECT_EQ(autocast::to_f32(f.to(DType::f64)).dtype(), DType::f64) << "f64 stays f64";
}

TEST(Autocast, GradientsFlowBackThroughTheCastsInF32) {
  Tensor w = testing::lit({0.5, -1.25, 2.0}, {3}, DType::f32);
  w.set_requires_grad(true);
  Tensor loss;
  {
    autocast::Guard on(true, DType::bf16);
    loss = ops::sum(ops::mul(autocast::to_low(w), autocast::to_low(w)).to(DType::f32));
  }
  loss.backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), DType::f32);
  testing::expect_close(w.grad(), testing::lit({1.0, -2.5, 4.0}, {3}, DType::f32), 1e-6, 1e-6);
}

TEST(Autocast, ParseMode) {
  DType dt = DType::f32;
  EXPECT_FALSE(autocast::parse_mode("off", dt));
  EXPECT_TRUE(autocast::parse_mode("f16", dt));
  EXPECT_EQ(dt, DType::f16);
  EXPECT_TRUE(autocast::parse_mode("bf16", dt));
  EXPECT_EQ(dt, DType::bf16);
  EXPECT_NE(testing::error_of([&] { autocast::parse_mode("fp8", dt); }).find("fp8"),
            std::string::npos);
}

}  // namespace
}  // namespace tcv
