// Segmentation metrics against a reference computed straight from the label
// maps (not through a confusion matrix), as mmsegmentation's
// intersect_and_union + total_area_to_metrics do: per-class IoU and accuracy,
// mIoU and mean accuracy as nan-means, pixel accuracy; ignored pixels, a class
// absent from both prediction and ground truth (NaN, left out of the means), a
// class only predicted (IoU 0, counted), a hand example; the meter's
// accumulation over batches, other ranks' counts, reset.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/ops.h"
#include "engine/rng.h"
#include "support/gradcheck.h"
#include "train/eval/seg_miou.h"

namespace tcv {
namespace {

using train::ConfusionMeter;
using train::seg_metrics;
using train::SegMetrics;

// mmsegmentation's computation on flat label maps.
SegMetrics reference(const std::vector<int64_t>& pred, const std::vector<int64_t>& gt, int64_t c,
                     int64_t ignore) {
  std::vector<double> inter(c, 0), area_pred(c, 0), area_label(c, 0);
  double correct = 0, total = 0;
  for (size_t i = 0; i < gt.size(); ++i) {
    if (gt[i] == ignore) continue;
    area_label[gt[i]] += 1;
    area_pred[pred[i]] += 1;
    if (pred[i] == gt[i]) inter[gt[i]] += 1, correct += 1;
    total += 1;
  }
  SegMetrics m;
  double iou_sum = 0, acc_sum = 0;
  int n_iou = 0, n_acc = 0;
  for (int64_t k = 0; k < c; ++k) {
    const double uni = area_pred[k] + area_label[k] - inter[k];
    m.iou.push_back(inter[k] / uni);  // 0/0 = NaN
    m.acc.push_back(inter[k] / area_label[k]);
    if (!std::isnan(m.iou.back())) iou_sum += m.iou.back(), ++n_iou;
    if (!std::isnan(m.acc.back())) acc_sum += m.acc.back(), ++n_acc;
  }
  m.miou = iou_sum / n_iou;
  m.mean_acc = acc_sum / n_acc;
  m.pixel_acc = correct / total;
  m.pixels = static_cast<int64_t>(total);
  return m;
}

void expect_same(const SegMetrics& a, const SegMetrics& b, double tol) {
  EXPECT_NEAR(a.miou, b.miou, tol);
  EXPECT_NEAR(a.mean_acc, b.mean_acc, tol);
  EXPECT_NEAR(a.pixel_acc, b.pixel_acc, tol);
  EXPECT_EQ(a.pixels, b.pixels);
  ASSERT_EQ(a.iou.size(), b.iou.size());
  for (size_t k = 0; k < a.iou.size(); ++k) {
    EXPECT_EQ(std::isnan(a.iou[k]), std::isnan(b.iou[k])) << "iou " << k;
    if (!std::isnan(b.iou[k])) {
      EXPECT_NEAR(a.iou[k], b.iou[k], tol) << "iou " << k;
    }
    EXPECT_EQ(std::isnan(a.acc[k]), std::isnan(b.acc[k])) << "acc " << k;
    if (!std::isnan(b.acc[k])) {
      EXPECT_NEAR(a.acc[k], b.acc[k], tol) << "acc " << k;
    }
  }
}

TEST(SegMiou, HandExample) {
  // 4 classes; class 3 appears nowhere; 255 ignored.
  //   gt:   0 0 1 1 2 2 255 1
  //   pred: 0 1 1 1 2 0   3 2
  // class 0: inter 1, pred 2, label 2 -> IoU 1/3, acc 1/2
  // class 1: inter 2, pred 3, label 3 -> IoU 2/4, acc 2/3
  // class 2: inter 1, pred 2, label 2 -> IoU 1/3, acc 1/2
  // class 3: 0/0 -> NaN (the ignored pixel predicted 3 does not count)
  ConfusionMeter meter(4);
  meter.update(from_vector<int64_t>({0, 1, 1, 1, 2, 0, 3, 2}, {1, 2, 4}),
               from_vector<int64_t>({0, 0, 1, 1, 2, 2, 255, 1}, {1, 2, 4}));
  const SegMetrics m = meter.compute();
  EXPECT_NEAR(m.iou[0], 1.0 / 3, 1e-15);
  EXPECT_NEAR(m.iou[1], 0.5, 1e-15);
  EXPECT_NEAR(m.iou[2], 1.0 / 3, 1e-15);
  EXPECT_TRUE(std::isnan(m.iou[3]));
  EXPECT_TRUE(std::isnan(m.acc[3]));
  EXPECT_NEAR(m.miou, (1.0 / 3 + 0.5 + 1.0 / 3) / 3, 1e-15);
  EXPECT_NEAR(m.mean_acc, (0.5 + 2.0 / 3 + 0.5) / 3, 1e-15);
  EXPECT_NEAR(m.pixel_acc, 4.0 / 7, 1e-15);
  EXPECT_EQ(m.pixels, 7);
}

TEST(SegMiou, EqualsMmsegReferenceOnSyntheticPredictions) {
  // 19 classes; class 5 absent from both (NaN, not averaged); class 11 only
  // predicted (IoU 0, averaged; accuracy NaN); class 17 only in the ground truth
  // (IoU 0, accuracy 0); 12% of pixels ignored; predictions right 70% of the time.
  const int64_t c = 19;
  Generator g(9);
  const Shape shape{3, 61, 47};
  Tensor gt = randint(0, c, shape, {.dtype = DType::i64}, &g);
  gt = ops::masked_fill(gt, ops::eq(gt, 5.0), 4);
  gt = ops::masked_fill(gt, ops::eq(gt, 11.0), 12);
  Tensor noise = randint(0, c, shape, {.dtype = DType::i64}, &g);
  noise = ops::masked_fill(noise, ops::eq(noise, 5.0), 6);
  noise = ops::masked_fill(noise, ops::eq(noise, 17.0), 11);
  Tensor pred = ops::where(ops::lt(rand(shape, {.dtype = DType::f64}, &g), 0.7), gt, noise);
  pred = ops::masked_fill(pred, ops::eq(pred, 17.0), 16);
  gt = ops::masked_fill(gt, ops::lt(rand(shape, {.dtype = DType::f64}, &g), 0.12), 255);

  const SegMetrics want = reference(pred.to_vector<int64_t>(), gt.to_vector<int64_t>(), c, 255);
  ASSERT_TRUE(std::isnan(want.iou[5]));
  ASSERT_EQ(want.iou[11], 0.0);
  ASSERT_TRUE(std::isnan(want.acc[11]));
  ASSERT_EQ(want.iou[17], 0.0);
  ASSERT_EQ(want.acc[17], 0.0);
  // Batch by batch from labels, and from logits whose argmax is pred.
  ConfusionMeter labels(c), logits(c);
  for (int64_t n = 0; n < 3; ++n) {
    const Tensor p = pred.narrow(0, n, 1), t = gt.narrow(0, n, 1);
    labels.update(p, t);
    // One-hot logits (1, C, H, W) with noise below the winning margin.
    Tensor x =
        ops::add(ops::mul(rand({1, c, 61, 47}, {}, &g), 0.5),
                 ops::cast(ops::eq(arange(c).view({1, c, 1, 1}), p.unsqueeze(1)), DType::f32));
    logits.update(x, t);
  }
  expect_same(labels.compute(), want, 1e-6);
  expect_same(logits.compute(), want, 1e-6);
  expect_same(seg_metrics(labels.counts(), c), want, 1e-6);
}

TEST(SegMiou, MeterAddsOtherRanksCountsAndResets) {
  const int64_t c = 3;
  const Tensor p = from_vector<int64_t>({0, 1, 2, 2}, {1, 4});
  const Tensor t = from_vector<int64_t>({0, 1, 1, 2}, {1, 4});
  ConfusionMeter a(c), b(c);
  a.update(p, t);
  b.update(p, t);
  b.update(p, t);
  a.add_counts(a.counts());  // another rank with the same counts
  EXPECT_EQ(a.counts(), b.counts());
  expect_same(a.compute(), b.compute(), 0);
  a.reset();
  EXPECT_EQ(a.counts(), std::vector<int64_t>(9, 0));
  const SegMetrics empty = a.compute();
  EXPECT_TRUE(std::isnan(empty.miou));
  EXPECT_TRUE(std::isnan(empty.pixel_acc));
  EXPECT_EQ(empty.pixels, 0);
  EXPECT_THROW(a.add_counts({1, 2}), Error);
  EXPECT_THROW(seg_metrics({1, 2, 3}, 2), Error);
  EXPECT_THROW(ConfusionMeter(0), Error);
}

}  // namespace
}  // namespace tcv
