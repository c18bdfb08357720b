// The Upsample layer against the functional op (in its own binary: it needs
// ops::upsample).
#include <gtest/gtest.h>

#include "layers/shape.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

TEST(Upsample, ScaleFactorAndSize) {
  Tensor x = from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2});
  nn::Upsample up({.scale_factor = 2});
  Tensor y = up(x);
  ASSERT_EQ(y.shape(), (Shape{1, 1, 4, 4}));
  EXPECT_EQ(y.to_vector<float>(),
            (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
  // Non-integer factors floor the size, as PyTorch.
  EXPECT_EQ(nn::Upsample({.scale_factor = 1.5})(ones({2, 3, 5, 3})).shape(), (Shape{2, 3, 7, 4}));
  nn::Upsample bil({.size = {3, 5}, .mode = ops::InterpMode::bilinear, .align_corners = true});
  Tensor r = randn({2, 2, 4, 4});
  testing::expect_close(
      bil(r), ops::upsample(r, {3, 5}, {.mode = ops::InterpMode::bilinear, .align_corners = true}),
      0, 0);
  // align_corners: the corners are kept exactly.
  const auto v = bil(x).to_vector<float>();
  EXPECT_FLOAT_EQ(v[0], 1.0f);
  EXPECT_FLOAT_EQ(v[4], 2.0f);
  EXPECT_FLOAT_EQ(v[14], 4.0f);
  EXPECT_FLOAT_EQ(v[2], 1.5f);
  EXPECT_THROW(up(ones({4, 4})), Error);
}

}  // namespace
}  // namespace tcv
