#include <gtest/gtest.h>

#include <limits>

#include "train/metrics.h"

using namespace tcv;
using namespace tcv::train;

TEST(Metrics, TopKCorrect) {
  // 4 samples, 6 classes.
  const Tensor logits =
      from_vector(std::vector<float>{0.1f, 0.9f, 0.2f, 0.3f, 0.0f, 0.5f,  // order 1,5,3,2,0,4
                                     5.0f, 1.0f, 2.0f, 3.0f, 4.0f, 0.0f,  // order 0,4,3,2,1,5
                                     1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f,  // all tied
                                     0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 9.0f},
                  {4, 6});
  const Tensor target = from_vector(std::vector<int64_t>{1, 5, 3, 5});
  // ranks: 0, 5, 3 (ties: lower index first), 0
  const auto c = topk_correct(logits, target, {1, 2, 4, 5, 6});
  EXPECT_EQ(c, (std::vector<int64_t>{2, 2, 3, 3, 4}));

  AccuracyMeter m;
  m.update(logits, target);
  EXPECT_DOUBLE_EQ(m.top1(), 50.0);
  EXPECT_DOUBLE_EQ(m.top5(), 75.0);
  m.update(logits.narrow(0, 0, 1), target.narrow(0, 0, 1));
  EXPECT_EQ(m.count(), 5);
  EXPECT_DOUBLE_EQ(m.top1(), 60.0);
  EXPECT_DOUBLE_EQ(m.top5(), 80.0);
  m.reset();
  EXPECT_EQ(m.top1(), 0.0);
}

// Issue 25, item 2: every comparison with NaN is false, so the target of an
// all-NaN row once ranked first: a NaN model scored top-1 100%. A row holding
// NaN now counts as wrong for every k; inf is a number and ranks as one.
TEST(Metrics, RowsHoldingNaNAreWrong) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor logits = from_vector(std::vector<float>{nan, nan, nan,      // all NaN
                                                       0.0f, 2.0f, nan,    // one NaN
                                                       inf, 1.0f, 0.0f,    // inf: first
                                                       -inf, -inf, 0.0f},  // target 2 first
                                    {4, 3});
  const Tensor target = from_vector(std::vector<int64_t>{0, 1, 0, 2});
  EXPECT_EQ(topk_correct(logits, target, {1, 2, 3, 5}), (std::vector<int64_t>{2, 2, 2, 2}));
  AccuracyMeter m;
  m.update(from_vector(std::vector<float>(10 * 6, nan), {10, 6}),
           zeros({10}, {.dtype = DType::i64}));
  EXPECT_EQ(m.top1(), 0.0);
  EXPECT_EQ(m.top5(), 0.0);
  EXPECT_EQ(m.count(), 10);
}

TEST(Metrics, RejectsBadInput) {
  const Tensor logits = zeros({2, 3});
  EXPECT_THROW(topk_correct(logits, from_vector(std::vector<int64_t>{0, 3}), {1}), Error);
  EXPECT_THROW(topk_correct(logits, from_vector(std::vector<int64_t>{0}), {1}), Error);
  EXPECT_THROW(topk_correct(zeros({6}), from_vector(std::vector<int64_t>{0}), {1}), Error);
}

TEST(Metrics, AverageMeterWeightsByCount) {
  AverageMeter a;
  a.update(1.0, 3);
  a.update(3.0, 1);
  EXPECT_DOUBLE_EQ(a.mean(), 1.5);
  EXPECT_EQ(a.count(), 4);
}
