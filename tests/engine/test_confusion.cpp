// confusion_matrix: counts equal to a direct count over random labels with
// ignored pixels, logits (argmax in the kernel, first maximum on ties, NaN
// wins), accumulation in place, many column blocks and threads, and errors
// that name the bad value and its position.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <vector>

#include "engine/ops.h"
#include "engine/rng.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

using testing::error_of;

// The count written out: one pass over the flat labels.
std::vector<int64_t> direct_count(const Tensor& pred, const Tensor& target, int64_t c,
                                  int64_t ignore) {
  std::vector<int64_t> m(static_cast<size_t>(c * c), 0);
  const auto p = pred.contiguous().to_vector<int64_t>(),
             t = target.contiguous().to_vector<int64_t>();
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i] != ignore) ++m[static_cast<size_t>(t[i] * c + p[i])];
  return m;
}

Tensor labels(const Shape& shape, int64_t c, uint64_t seed, double ignored = 0.0,
              int64_t ignore = 255) {
  Generator g(seed);
  Tensor t = randint(0, c, shape, {.dtype = DType::i64}, &g);
  if (ignored > 0)
    t = ops::masked_fill(t, ops::lt(rand(shape, {.dtype = DType::f64}, &g), ignored),
                         static_cast<double>(ignore));
  return t;
}

TEST(ConfusionMatrix, LabelsEqualADirectCount) {
  for (const Shape& shape : {Shape{2, 17, 23}, Shape{1, 1}, Shape{3, 200, 130}, Shape{5}}) {
    const Tensor t = labels(shape, 7, 1, 0.15), p = labels(shape, 7, 2);
    const Tensor m = ops::confusion_matrix(p, t, 7);
    EXPECT_EQ(m.shape(), (Shape{7, 7}));
    EXPECT_EQ(m.dtype(), DType::i64);
    EXPECT_EQ(m.to_vector<int64_t>(), direct_count(p, t, 7, 255)) << shape_str(shape);
  }
}

TEST(ConfusionMatrix, HandExample) {
  // targets 0 1 1 2 255 2, predictions 0 1 2 2 0 0: rows are the ground truth.
  const Tensor t = from_vector<int64_t>({0, 1, 1, 2, 255, 2}, {1, 6});
  const Tensor p = from_vector<int64_t>({0, 1, 2, 2, 0, 0}, {1, 6});
  EXPECT_EQ(ops::confusion_matrix(p, t, 3).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 0, 0, 0, 1, 1, 1, 0, 1}));
  // Another ignore_index: 255 is now out of range, 2 is ignored.
  EXPECT_NE(error_of([&] {
              ops::confusion_matrix(p, t, 3, {.ignore_index = 2});
            }).find("target 255 at (0, 4) is neither a class in [0, 3) nor ignore_index 2"),
            std::string::npos);
}

TEST(ConfusionMatrix, LogitsTakeTheArgmax) {
  Generator g(3);
  for (DType dt : {DType::f32, DType::f64})
    for (const Shape& shape : {Shape{2, 21, 37, 29}, Shape{3, 4, 1, 200}, Shape{2, 5}}) {
      const Tensor x = randn(shape, {.dtype = dt}, &g);
      Shape tshape{shape[0]};
      for (size_t i = 2; i < shape.size(); ++i) tshape.push_back(shape[i]);
      const Tensor t = labels(tshape, shape[1], 4, 0.1);
      EXPECT_EQ(ops::confusion_matrix(x, t, shape[1]).to_vector<int64_t>(),
                direct_count(ops::argmax(x, 1), t, shape[1], 255))
          << dtype_name(dt) << " " << shape_str(shape);
    }
}

TEST(ConfusionMatrix, TiesGoToTheFirstClassAndNanWins) {
  // Three positions over 3 classes: a tie between classes 1 and 2, all equal, a NaN at class 2.
  const Tensor x = testing::lit({0, 1, 1, 1, 1, 1, 1, 1, NAN}, {3, 3}, DType::f32)
                       .transpose(0, 1)
                       .contiguous()
                       .view({1, 3, 3});  // (N, C, S): x[0, c, s]
  const Tensor t = from_vector<int64_t>({1, 0, 2}, {1, 3});
  // Predictions: 1 (first of the tie), 0 (all equal), 2 (NaN).
  EXPECT_EQ(ops::confusion_matrix(x, t, 3).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 0, 0, 0, 1, 0, 0, 0, 1}));
}

TEST(ConfusionMatrix, AccumulatesInPlaceWhateverTheThreadCount) {
  const Tensor t = labels({4, 64, 300}, 19, 5, 0.2), p = labels({4, 64, 300}, 19, 6);
  Tensor counts = zeros({19, 19}, {.dtype = DType::i64});
  const int prev = omp_get_max_threads();
  omp_set_num_threads(1);
  ops::confusion_matrix_add_(counts, p, t);
  omp_set_num_threads(std::max(2, prev));
  ops::confusion_matrix_add_(counts, p, t);
  omp_set_num_threads(prev);
  std::vector<int64_t> want = direct_count(p, t, 19, 255);
  for (auto& v : want) v *= 2;
  EXPECT_EQ(counts.to_vector<int64_t>(), want);
}

TEST(ConfusionMatrix, Errors) {
  const Tensor t = from_vector<int64_t>({0, 1, 7, 2, 9, 1}, {2, 3});
  const Tensor p = zeros({2, 3}, {.dtype = DType::i64});
  EXPECT_NE(error_of([&] { ops::confusion_matrix(p, t, 3); })
                .find("[confusion_matrix] target 7 at (0, 2) is neither a class in [0, 3) nor "
                      "ignore_index 255 (2 such positions)"),
            std::string::npos);
  const Tensor bad_pred = from_vector<int64_t>({0, 1, 2, 3, 0, -1}, {2, 3});
  EXPECT_NE(error_of([&] {
              ops::confusion_matrix(bad_pred, zeros({2, 3}, {.dtype = DType::i64}), 3);
            }).find("predicted label 3 at (1, 0) is not a class in [0, 3) (2 such positions)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              ops::confusion_matrix(zeros({2, 4, 3}), t, 3);
            }).find("logits (2, 4, 3) and target (2, 3) do not match"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              ops::confusion_matrix(p, zeros({2, 3}), 3);
            }).find("target must hold i64 labels"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              ops::confusion_matrix(from_vector<int32_t>({0, 1}, {1, 2}),
                                    zeros({1, 2}, {.dtype = DType::i64}), 3);
            }).find("predictions must be i64 labels or floating logits"),
            std::string::npos);
  Tensor wrong = zeros({3, 3});
  EXPECT_NE(error_of([&] {
              ops::confusion_matrix_add_(wrong, p, zeros({2, 3}, {.dtype = DType::i64}));
            }).find("counts must be a contiguous (C, C) i64 tensor"),
            std::string::npos);
  // Nothing to count: zeros.
  EXPECT_EQ(ops::confusion_matrix(zeros({0, 3}, {.dtype = DType::i64}),
                                  zeros({0, 3}, {.dtype = DType::i64}), 2)
                .to_vector<int64_t>(),
            (std::vector<int64_t>(4, 0)));
}

}  // namespace
}  // namespace tcv
