#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <vector>

#include "engine/ops.h"
#include "engine/rng.h"

namespace tcv {
namespace {

// The f64 sum of squares of n f32 values of magnitude <= 1 (rounded once each
// to double, so squares are exact): the sum's error is at most n·2⁻⁵³·Σx².
TEST(SumOfSquares, F64AccumulationAcrossDtypesAndLayouts) {
  manual_seed(3);
  const Tensor a = rand({300, 700}) * 2.0 - 1.0;              // f32, 210,000 elements: many pieces
  const Tensor b = randn({5, 7}, {.dtype = DType::f64}).t();  // not contiguous
  const Tensor c = (rand({33}) - 0.5).to(DType::f16);
  long double ref = 0;
  for (const float v : a.to_vector<float>()) ref += static_cast<long double>(v) * v;
  for (const double v : b.to_vector<double>()) ref += static_cast<long double>(v) * v;
  for (const float v : c.to_vector<float>()) ref += static_cast<long double>(v) * v;
  const double got = ops::sum_of_squares({a, b, c});
  const double bound = 210000.0 * 0x1p-53 * static_cast<double>(ref) * 2;
  EXPECT_NEAR(got, static_cast<double>(ref), bound);
  EXPECT_EQ(ops::sum_of_squares({}), 0.0);
}

TEST(SumOfSquares, SameBitsOnAnyThreadCount) {
  manual_seed(4);
  const Tensor a = randn({1 << 20});
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const double one = ops::sum_of_squares({a});
  omp_set_num_threads(2);
  const double two = ops::sum_of_squares({a});
  omp_set_num_threads(saved);
  EXPECT_EQ(one, two);
}

TEST(SumOfSquares, RejectsIntegers) {
  try {
    ops::sum_of_squares({arange(4)});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[sum_of_squares] takes floating tensors, got i64"),
              std::string::npos)
        << e.what();
  }
}

TEST(FusedStep, RejectsASlotItCannotTake) {
  Tensor p = zeros({4}, {.dtype = DType::f16});
  try {
    ops::sgd_step_({{.param = p, .grad = zeros({4}, {.dtype = DType::f16})}}, {.lr = 0.1});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[sgd_step_]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tcv
