// Classification metrics: top-k accuracy and running averages.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/tensor.h"

namespace tcv::train {

/// For each k in `ks`: how many rows of logits (N, C) have their target (N, i64)
/// among the k largest scores. Ties rank the lower class index first, as a
/// stable descending sort would. k larger than C counts every row. A row that
/// holds NaN is wrong for every k, so a model with NaN outputs scores 0, never
/// above chance (PyTorch's topk ranks NaN above every number instead, so there
/// a row's NaN classes come first).
std::vector<int64_t> topk_correct(const Tensor& logits, const Tensor& target,
                                  const std::vector<int64_t>& ks);

/// Accumulates top-1/top-5 over batches.
class AccuracyMeter {
 public:
  void update(const Tensor& logits, const Tensor& target);
  /// Percentages in [0, 100] (0 before any update).
  double top1() const { return count_ ? 100.0 * correct1_ / count_ : 0.0; }
  double top5() const { return count_ ? 100.0 * correct5_ / count_ : 0.0; }
  int64_t count() const { return count_; }
  void reset() { correct1_ = correct5_ = count_ = 0; }
  int64_t correct1() const { return correct1_; }
  int64_t correct5() const { return correct5_; }
  /// Adds counts made elsewhere (other ranks' shares of an evaluation).
  void add_counts(int64_t correct1, int64_t correct5, int64_t count) {
    correct1_ += correct1;
    correct5_ += correct5;
    count_ += count;
  }

 private:
  int64_t correct1_ = 0, correct5_ = 0, count_ = 0;
};

/// A weighted running mean (e.g. of the loss over samples).
class AverageMeter {
 public:
  void update(double value, int64_t n = 1) {
    sum_ += value * static_cast<double>(n);
    count_ += n;
  }
  double mean() const { return count_ ? sum_ / static_cast<double>(count_) : 0.0; }
  int64_t count() const { return count_; }
  /// The weighted sum (mean() · count()).
  double sum() const { return sum_; }
  /// Adds a sum and count made elsewhere (another rank's share of an evaluation).
  void add(double sum, int64_t count) {
    sum_ += sum;
    count_ += count;
  }
  void reset() { sum_ = 0, count_ = 0; }

 private:
  double sum_ = 0;
  int64_t count_ = 0;
};

}  // namespace tcv::train
