#include "train/metrics.h"

#include <cmath>

namespace tcv::train {

std::vector<int64_t> topk_correct(const Tensor& logits, const Tensor& target,
                                  const std::vector<int64_t>& ks) {
  TCV_CHECK(logits.dim() == 2, "[topk_correct] logits must be (N, C), got ", logits.shape_str());
  TCV_CHECK(target.dim() == 1 && target.size(0) == logits.size(0), "[topk_correct] target ",
            target.shape_str(), " does not match logits ", logits.shape_str());
  const int64_t n = logits.size(0), c = logits.size(1);
  const std::vector<double> s = logits.to(kCPU).to_vector<double>();
  const std::vector<int64_t> y = target.to(kCPU).to_vector<int64_t>();
  std::vector<int64_t> correct(ks.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    TCV_CHECK(y[i] >= 0 && y[i] < c, "[topk_correct] target ", y[i], " of row ", i, " outside [0, ",
              c, ")");
    // The target's rank is the number of classes that sort before it. A row
    // holding NaN ranks nothing (every comparison with NaN is false, which once
    // put the target first): it counts as wrong for every k.
    const double* row = s.data() + i * c;
    const double t = row[y[i]];
    bool nan = false;
    int64_t rank = 0;
    for (int64_t j = 0; j < c; ++j) {
      nan |= std::isnan(row[j]);
      rank += row[j] > t || (row[j] == t && j < y[i]);
    }
    if (nan) continue;
    for (size_t k = 0; k < ks.size(); ++k) correct[k] += rank < ks[k];
  }
  return correct;
}

void AccuracyMeter::update(const Tensor& logits, const Tensor& target) {
  const auto c = topk_correct(logits, target, {1, 5});
  correct1_ += c[0];
  correct5_ += c[1];
  count_ += logits.size(0);
}

}  // namespace tcv::train
