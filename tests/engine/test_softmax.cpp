// softmax / log_softmax beyond the op table's cases (tests/ops/cases_softmax.cpp):
// PyTorch values, stability, every dim against the composite, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "support/gradcheck.h"

namespace tcv {
namespace {

using testing::expect_close;
using testing::lit;
using testing::rand_f64;

const std::vector<double> kX = {1.0, 2.0, 0.5, -1.0, 0.3, -0.2, 2.5, 1.0, -1.5, 0.0, 0.7, 0.2};

TEST(Softmax, MatchesPyTorch) {
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor x = lit(kX, {3, 4}, dt);
    // torch.softmax(x, 1) and torch.log_softmax(x, 0), PyTorch 1.13.
    expect_close(ops::softmax(x, 1),
                 lit({0.22420782, 0.60946004, 0.13598892, 0.03034323, 0.07908078, 0.04796492,
                      0.71370515, 0.15924914, 0.05004842, 0.22430147, 0.45168768, 0.27396243},
                     {3, 4}),
                 1e-6, 1e-6, dtype_name(dt));
    expect_close(ops::log_softmax(x, 0),
                 lit({-0.45658291, -0.22004952, -2.26285197, -2.46037255, -1.15658291, -2.42004952,
                      -0.26285197, -0.46037255, -2.95658291, -2.22004952, -2.06285197, -1.26037255},
                     {3, 4}),
                 1e-6, 1e-6, dtype_name(dt));
  }
}

TEST(Softmax, LargeInputsStayFinite) {
  Tensor x = lit({1000, 1001, 1002, -1000, -1001, -1002}, {2, 3}, DType::f32);
  expect_close(
      ops::softmax(x, -1),
      lit({0.09003057, 0.24472847, 0.66524096, 0.66524096, 0.24472847, 0.09003057}, {2, 3}), 1e-6,
      1e-5);
  expect_close(
      ops::log_softmax(x, -1),
      lit({-2.40760596, -1.40760596, -0.40760596, -0.40760596, -1.40760596, -2.40760596}, {2, 3}),
      1e-5, 1e-5);
  const double inf = std::numeric_limits<double>::infinity();
  expect_close(ops::softmax(lit({-inf, 0.0, -inf}, {3}), 0), lit({0, 1, 0}, {3}));
}

TEST(Softmax, EveryDimAgainstComposite) {
  Tensor x = rand_f64({3, 4, 5, 2}, 1, -3, 3, false);
  for (int64_t d = -4; d < 4; ++d) {
    Tensor s = ops::softmax(x, d);
    Tensor e = ops::exp(x);
    expect_close(s, ops::div(e, ops::sum(e, {d}, true)), 1e-12, 1e-10, "softmax dim");
    expect_close(ops::log_softmax(x, d), ops::log(s), 1e-12, 1e-10, "log_softmax dim");
  }
  // Wide inner dims take the blocked path: more than one block of 64 columns.
  Tensor w = rand_f64({2, 3, 150}, 2, -3, 3, false);
  Tensor ew = ops::exp(w);
  expect_close(ops::softmax(w, 1), ops::div(ew, ops::sum(ew, {1}, true)), 1e-12, 1e-10);
  // Non-contiguous input.
  Tensor t = x.transpose(0, 3);
  Tensor et = ops::exp(t);
  expect_close(ops::softmax(t, 1), ops::div(et, ops::sum(et, {1}, true)), 1e-12, 1e-10);
}

TEST(Softmax, Errors) {
  EXPECT_THROW(ops::softmax(zeros({2, 3}), 2), Error);
  EXPECT_THROW(ops::softmax(zeros({2, 3}, {.dtype = DType::i64}), 1), Error);
}

}  // namespace
}  // namespace tcv
