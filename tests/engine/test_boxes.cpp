// Box ops beyond the op table's cases (tests/ops/cases_boxes.cpp, which check
// gradients and compare devices): box_iou values, nms against torchvision's
// keep lists on 1,200 golden cases and against the plain quadratic loop on
// large random inputs, batched_nms, ssd_match, known box codes, l2_normalize
// against its definition, and error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "engine/ops.h"
#include "engine/rng.h"
#include "engine/serialize.h"
#include "support/golden_formula.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

using testing::error_of;
using testing::golden_uniform;

Tensor boxes_f32(const std::vector<float>& v) {
  return from_vector<float>(v, {static_cast<int64_t>(v.size() / 4), 4});
}

TEST(BoxIou, Values) {
  const Tensor a = boxes_f32({0, 0, 10, 10, 0, 0, 2, 2});
  const Tensor b = boxes_f32({5, 5, 15, 15, 0, 0, 10, 10, 20, 20, 30, 30});
  const Tensor iou = ops::box_iou(a, b);
  ASSERT_EQ(iou.shape(), (Shape{2, 3}));
  const std::vector<float> v = iou.to_vector<float>();
  EXPECT_FLOAT_EQ(v[0], 25.0f / 175.0f);
  EXPECT_FLOAT_EQ(v[1], 1.0f);
  EXPECT_FLOAT_EQ(v[2], 0.0f);
  EXPECT_FLOAT_EQ(v[3], 0.0f);  // touching corner: no area
  EXPECT_FLOAT_EQ(v[4], 4.0f / 100.0f);
  EXPECT_FLOAT_EQ(v[5], 0.0f);
  const Tensor d = ops::box_iou(a.to(DType::f64), b.to(DType::f64));
  EXPECT_EQ(d.dtype(), DType::f64);
  EXPECT_DOUBLE_EQ(d.to_vector<double>()[0], 25.0 / 175.0);
  EXPECT_EQ(ops::box_iou(a, boxes_f32({})).shape(), (Shape{2, 0}));
}

TEST(BoxIou, Errors) {
  EXPECT_NE(error_of([] {
              ops::box_iou(zeros({3, 5}), zeros({2, 4}));
            }).find("(N, 4)"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              ops::box_iou(zeros({3, 4}), zeros({2, 4}, {.dtype = DType::f64}));
            }).find("f64"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              ops::box_iou(zeros({3, 4}, {.dtype = DType::i64}), zeros({2, 4}));
            }).find("f32 or f64"),
            std::string::npos);
}

// torchvision's CPU loop, in the test: the oracle for inputs without tied scores.
std::vector<int64_t> reference_nms(const std::vector<float>& b, const std::vector<float>& s,
                                   double thr) {
  const int64_t n = static_cast<int64_t>(s.size());
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return s[x] > s[y]; });
  std::vector<char> supp(static_cast<size_t>(n), 0);
  std::vector<int64_t> keep;
  for (int64_t p = 0; p < n; ++p) {
    const int64_t i = order[p];
    if (supp[i]) continue;
    keep.push_back(i);
    const float* bi = &b[4 * i];
    const float ia = (bi[2] - bi[0]) * (bi[3] - bi[1]);
    for (int64_t q = p + 1; q < n; ++q) {
      const int64_t j = order[q];
      if (supp[j]) continue;
      const float* bj = &b[4 * j];
      const float w = std::max(0.0f, std::min(bi[2], bj[2]) - std::max(bi[0], bj[0]));
      const float h = std::max(0.0f, std::min(bi[3], bj[3]) - std::max(bi[1], bj[1]));
      const float inter = w * h;
      const float ja = (bj[2] - bj[0]) * (bj[3] - bj[1]);
      if (inter / (ia + ja - inter) > thr) supp[j] = 1;
    }
  }
  return keep;
}

TEST(Nms, SmallCase) {
  // Box 1 overlaps box 0 (IoU 0.68) and goes; box 2 is apart; box 3 equals box 2 with a
  // lower score and goes.
  const Tensor b = boxes_f32({0, 0, 10, 10, 1, 1, 11, 11, 50, 50, 60, 60, 50, 50, 60, 60});
  const Tensor s = from_vector<float>({0.9f, 0.8f, 0.7f, 0.6f});
  EXPECT_EQ(ops::nms(b, s, 0.5).to_vector<int64_t>(), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(ops::nms(b, s, 0.7).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2}));
  // IoU exactly 1 is not above a threshold of 1.
  EXPECT_EQ(ops::nms(b, s, 1.0).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(ops::nms(b, from_vector<float>({0.1f, 0.8f, 0.7f, 0.9f}), 0.5).to_vector<int64_t>(),
            (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(ops::nms(boxes_f32({}), from_vector<float>({}), 0.5).numel(), 0);
  EXPECT_EQ(ops::nms(b.to(DType::f64), s.to(DType::f64), 0.5).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 2}));
}

// The boxes and scores of golden case c, as scripts/make_golden_det.py's nms_case.
void nms_case(int64_t c, std::vector<float>& b, std::vector<float>& s) {
  const bool big = c % 50 == 49 - (c / 50) % 4;
  const int64_t n = big ? 1000 : (c * 37) % 49;
  const int64_t mode = c % 4;
  const double region = big ? 150.0 : 100.0;
  b.assign(static_cast<size_t>(4 * n), 0.0f);
  s.assign(static_cast<size_t>(n), 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    double v[8];
    for (int k = 0; k < 8; ++k) v[k] = golden_uniform(8 * i + k, 1000 + c);
    double x1, y1, w, h;
    if (mode >= 2) {
      x1 = std::floor(v[0] * 10.0) * 10.0;
      y1 = std::floor(v[1] * 10.0) * 10.0;
      w = (std::floor(v[2] * 5.0) - 1.0) * 10.0;
      h = (std::floor(v[3] * 5.0) - 1.0) * 10.0;
    } else {
      x1 = region * v[0];
      y1 = region * v[1];
      w = 5.0 + 40.0 * v[2];
      h = 5.0 + 40.0 * v[3];
      w = v[5] < 0.05 ? 0.0 : (v[5] > 0.95 ? -w : w);
    }
    const double score = mode == 1 || mode == 3 ? std::floor(v[4] * 5.0) / 5.0 : v[4];
    b[4 * i + 0] = static_cast<float>(x1);
    b[4 * i + 1] = static_cast<float>(y1);
    b[4 * i + 2] = static_cast<float>(x1 + w);
    b[4 * i + 3] = static_cast<float>(y1 + h);
    s[i] = static_cast<float>(score);
  }
}

TEST(Nms, EqualsTorchvisionOnGoldenCases) {
  const auto file =
      load_safetensors(testing::source_dir() + "/tests/data/golden/det_nms.safetensors");
  Tensor keep_all, offsets;
  for (const auto& [name, t] : file.tensors) {
    if (name == "nms.keep") keep_all = t;
    if (name == "nms.offsets") offsets = t;
  }
  ASSERT_TRUE(keep_all.defined() && offsets.defined());
  const std::vector<int32_t> keep = keep_all.to_vector<int32_t>();
  const std::vector<int32_t> off = offsets.to_vector<int32_t>();
  const double thresholds[] = {0.45, 0.3, 0.5, 0.7, 0.0, 0.9};
  int64_t equal = 0, cases = static_cast<int64_t>(off.size()) - 1, with_ties = 0;
  ASSERT_EQ(cases, 1200);
  std::vector<float> b, s;
  for (int64_t c = 0; c < cases; ++c) {
    nms_case(c, b, s);
    const int64_t n = static_cast<int64_t>(s.size());
    const double thr = thresholds[(c / 4) % 6];
    const std::vector<int64_t> got =
        ops::nms(from_vector<float>(b, {n, 4}), from_vector<float>(s, {n}), thr)
            .to_vector<int64_t>();
    const std::vector<int64_t> want(keep.begin() + off[c], keep.begin() + off[c + 1]);
    if (got == want) {
      ++equal;
      if (c % 4 == 1 || c % 4 == 3) ++with_ties;
    } else {
      ADD_FAILURE() << "nms case " << c << " (" << n << " boxes, threshold " << thr << "): kept "
                    << got.size() << " boxes, torchvision " << want.size();
    }
  }
  EXPECT_EQ(equal, cases);
  std::printf(
      "[ nms ] %lld of %lld keep lists equal to torchvision.ops.nms (%lld with tied "
      "scores)\n",
      static_cast<long long>(equal), static_cast<long long>(cases),
      static_cast<long long>(with_ties));
}

TEST(Nms, LeavesEqualTheQuadraticLoop) {
  // Large inputs take the spatial-leaf path; distinct scores make the order unique.
  for (int64_t n : {300, 2000, 10000}) {
    for (double thr : {0.3, 0.5, 0.8}) {
      if (n == 10000 && thr != 0.5) continue;  // the reference loop is quadratic
      Generator g(static_cast<uint64_t>(n) * 7 + static_cast<uint64_t>(thr * 10));
      const Tensor xy = rand({n, 2}, {}, &g) * 1000.0;
      const Tensor wh = rand({n, 2}, {}, &g) * 120.0 + 2.0;
      const Tensor b = ops::cat({xy, xy + wh}, 1).contiguous();
      const Tensor perm = randperm(n, &g).to(DType::f32);
      const Tensor s = (perm + 1.0) / static_cast<double>(n);
      const auto want = reference_nms(b.to_vector<float>(), s.to_vector<float>(), thr);
      const auto got = ops::nms(b, s, thr).to_vector<int64_t>();
      EXPECT_EQ(got, want) << n << " boxes, threshold " << thr;
    }
  }
}

TEST(Nms, NegativeThresholdAndNonFiniteBoxesTakeThePlainLoop) {
  // A negative threshold suppresses every box after the first that gives a number.
  Generator g(5);
  const int64_t n = 600;
  const Tensor xy = rand({n, 2}, {}, &g) * 1000.0;
  const Tensor b = ops::cat({xy, xy + 10.0}, 1).contiguous();
  const Tensor s = rand({n}, {}, &g);
  EXPECT_EQ(ops::nms(b, s, -0.1).numel(), 1);
  std::vector<float> bv = b.to_vector<float>();
  bv[0] = std::numeric_limits<float>::infinity();
  const auto want = reference_nms(bv, s.to_vector<float>(), 0.5);
  EXPECT_EQ(ops::nms(from_vector<float>(bv, {n, 4}), s, 0.5).to_vector<int64_t>(), want);
}

TEST(Nms, Errors) {
  EXPECT_NE(error_of([] {
              ops::nms(zeros({3, 4}), zeros({2}), 0.5);
            }).find("scores must be (3)"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              ops::nms(zeros({3, 4}), zeros({3}, {.dtype = DType::f64}), 0.5);
            }).find("scores f64"),
            std::string::npos);
}

TEST(BatchedNms, ClassesDoNotSuppressEachOther) {
  const Tensor b = boxes_f32({0, 0, 10, 10, 1, 1, 11, 11, 0, 0, 10, 10, 2, 2, 12, 12});
  const Tensor s = from_vector<float>({0.9f, 0.8f, 0.7f, 0.95f});
  const Tensor c = from_vector<int64_t>({1, 1, 2, 2});
  // Class 1: box 0 suppresses box 1. Class 2: box 3 (0.95) and box 2 have IoU 0.47.
  EXPECT_EQ(ops::batched_nms(b, s, c, 0.5).to_vector<int64_t>(), (std::vector<int64_t>{3, 0, 2}));
  EXPECT_EQ(ops::batched_nms(b, s, c, 0.4).to_vector<int64_t>(), (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(ops::batched_nms(boxes_f32({}), from_vector<float>({}), from_vector<int64_t>({}), 0.5)
                .numel(),
            0);
}

// Above 1,000 boxes, one NMS per category (as torchvision on the CPU): the
// coordinate trick shifts category 79's boxes by 79 x 1001, where f32's
// spacing is 2^-7, and box 1's edge at 5.000001 rounds to 5, making its IoU
// with box 0 exactly 0.5 (kept at threshold 0.5) where it is 0.5000001
// (suppressed).
TEST(BatchedNms, PerCategoryAboveAThousandBoxesKeepsIousExact) {
  auto run = [](int64_t fillers) {
    std::vector<float> b = {0, 0, 10, 10, 0, 0, 10, 5.000001f};
    std::vector<float> s = {0.9f, 0.8f};
    std::vector<int64_t> c = {79, 79};
    for (int64_t i = 0; i < fillers; ++i) {
      b.insert(b.end(), {990, 990, 1000, 1000});
      s.push_back(0.5f);
      c.push_back(0);
    }
    const auto n = static_cast<int64_t>(s.size());
    return ops::batched_nms(from_vector<float>(b, {n, 4}), from_vector<float>(s),
                            from_vector<int64_t>(c), 0.5)
        .to_vector<int64_t>();
  };
  // 1,002 boxes: per category; box 1 goes; one filler (the first) stays.
  EXPECT_EQ(run(1000), (std::vector<int64_t>{0, 2}));
  // 1,000 boxes: the trick, as torchvision's; box 1 survives its rounding.
  EXPECT_EQ(run(998), (std::vector<int64_t>{0, 1, 2}));
}

TEST(SsdMatch, ThresholdAndForcedMatches) {
  // 2 ground truths x 5 anchors.
  const Tensor iou = from_vector<float>({0.6f, 0.2f, 0.1f, 0.3f, 0.0f,  //
                                         0.5f, 0.4f, 0.55f, 0.3f, 0.0f},
                                        {2, 5});
  // Anchor 0: gt 0 (0.6); anchor 2: gt 1 (0.55 >= 0.5); anchors 1 (0.4), 3 and 4 fall
  // below the threshold, and the forced matches (gt 0 -> anchor 0, gt 1 -> anchor 2)
  // change nothing.
  EXPECT_EQ(ops::ssd_match(iou, 0.5).to_vector<int64_t>(),
            (std::vector<int64_t>{0, -1, 1, -1, -1}));
  // A ground truth whose best IoU is low still gets its best anchor.
  const Tensor low = from_vector<float>({0.1f, 0.3f, 0.2f, 0.9f, 0.8f, 0.0f}, {2, 3});
  EXPECT_EQ(ops::ssd_match(low, 0.5).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, -1}));
  // Two ground truths with the same best anchor: the later one keeps it.
  const Tensor shared = from_vector<float>({0.9f, 0.1f, 0.8f, 0.2f}, {2, 2});
  EXPECT_EQ(ops::ssd_match(shared, 0.5).to_vector<int64_t>(), (std::vector<int64_t>{1, -1}));
  // Equal maxima: the column match goes to gt 0, then gt 1 forces its best anchor.
  const Tensor tie = from_vector<double>({0.7, 0.7}, {2, 1});
  EXPECT_EQ(ops::ssd_match(tie, 0.5).to_vector<int64_t>(), (std::vector<int64_t>{1}));
  EXPECT_EQ(ops::ssd_match(zeros({0, 3}), 0.5).to_vector<int64_t>(),
            (std::vector<int64_t>{-1, -1, -1}));
}

TEST(BoxCoding, KnownCodesAndRoundTrip) {
  const Tensor anchors = from_vector<double>({0, 0, 10, 20, 5, 5, 15, 10}, {2, 4});
  const Tensor boxes = from_vector<double>({1, 2, 11, 22, 5, 5, 25, 15}, {2, 4});
  const Tensor codes = ops::encode_boxes(boxes, anchors);
  const std::vector<double> v = codes.to_vector<double>();
  // Box 0: centre moves (1, 2) on an anchor 10 x 20, size unchanged.
  EXPECT_NEAR(v[0], 10.0 * 1.0 / 10.0, 1e-12);
  EXPECT_NEAR(v[1], 10.0 * 2.0 / 20.0, 1e-12);
  EXPECT_NEAR(v[2], 0.0, 1e-12);
  EXPECT_NEAR(v[3], 0.0, 1e-12);
  // Box 1: twice as wide and tall, centre (15, 10) against (10, 7.5).
  EXPECT_NEAR(v[4], 10.0 * 5.0 / 10.0, 1e-12);
  EXPECT_NEAR(v[5], 10.0 * 2.5 / 5.0, 1e-12);
  EXPECT_NEAR(v[6], 5.0 * std::log(2.0), 1e-12);
  EXPECT_NEAR(v[7], 5.0 * std::log(2.0), 1e-12);
  testing::expect_close(ops::decode_boxes(codes, anchors), boxes, 1e-12, 1e-12, "round trip");
  // Other weights.
  const Tensor c1 = ops::encode_boxes(boxes, anchors, {.x = 1, .y = 1, .w = 1, .h = 1});
  EXPECT_NEAR(c1.to_vector<double>()[0], 0.1, 1e-12);
  // dw is clamped at log(1000/16) before exp.
  const Tensor big = from_vector<double>({0, 0, 100, 100}, {1, 4});
  const Tensor out = ops::decode_boxes(big, anchors.narrow(0, 0, 1));
  EXPECT_NEAR(out.to_vector<double>()[2] - out.to_vector<double>()[0], 10.0 * 1000.0 / 16.0, 1e-9);
}

TEST(L2Normalize, ValuesAgainstTheDefinition) {
  Generator g(9);
  const Tensor x = randn({2, 5, 3, 4}, {.dtype = DType::f64}, &g);
  const Tensor y = ops::l2_normalize(x, 1);
  const Tensor ref = x / ops::sqrt(ops::sum(ops::square(x), {1}, true));
  testing::expect_close(y, ref, 1e-15, 1e-14, "dim 1");
  testing::expect_close(ops::l2_normalize(x, -1),
                        x / ops::sqrt(ops::sum(ops::square(x), {3}, true)), 1e-15, 1e-14,
                        "last dim");
  // A zero vector stays zero (divided by eps).
  const Tensor z = ops::l2_normalize(zeros({1, 3, 1, 1}, {.dtype = DType::f64}));
  EXPECT_EQ(z.to_vector<double>(), (std::vector<double>{0, 0, 0}));
  // f32: each output is x·(1 + δ) with |δ| <= (c + 3)·u from the sum of squares,
  // the square root and the division.
  const Tensor y32 = ops::l2_normalize(x.to(DType::f32), 1);
  testing::expect_close(y32, ref, 0.0, 8.0 * 0x1p-24, "f32");
}

TEST(L2Normalize, Errors) {
  EXPECT_NE(error_of([] {
              ops::l2_normalize(zeros({2, 3}), 1, 0.0);
            }).find("eps"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              ops::l2_normalize(zeros({2, 3}, {.dtype = DType::i32}));
            }).find("f32 or f64"),
            std::string::npos);
}

}  // namespace
}  // namespace tcv
