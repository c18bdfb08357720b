#include "train/eval/seg_miou.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/ops/reduce.h"

namespace tcv::train {

namespace {

double nan_mean(const std::vector<double>& v) {
  double sum = 0;
  int64_t n = 0;
  for (double x : v)
    if (!std::isnan(x)) sum += x, ++n;
  return n ? sum / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

SegMetrics seg_metrics(const std::vector<int64_t>& counts, int64_t c) {
  TCV_CHECK(c > 0 && static_cast<int64_t>(counts.size()) == c * c, "[seg_metrics] expects ", c,
            " x ", c, " counts, got ", counts.size(), " values");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  SegMetrics m;
  m.iou.assign(static_cast<size_t>(c), nan);
  m.acc.assign(static_cast<size_t>(c), nan);
  std::vector<int64_t> label(static_cast<size_t>(c), 0), pred(static_cast<size_t>(c), 0);
  int64_t correct = 0;
  for (int64_t t = 0; t < c; ++t)
    for (int64_t p = 0; p < c; ++p) {
      const int64_t v = counts[static_cast<size_t>(t * c + p)];
      TCV_CHECK(v >= 0, "[seg_metrics] negative count ", v, " at (", t, ", ", p, ")");
      label[static_cast<size_t>(t)] += v;
      pred[static_cast<size_t>(p)] += v;
      m.pixels += v;
      if (t == p) correct += v;
    }
  for (int64_t k = 0; k < c; ++k) {
    const auto i = static_cast<size_t>(k);
    const int64_t inter = counts[static_cast<size_t>(k * c + k)];
    const int64_t uni = label[i] + pred[i] - inter;
    if (uni > 0) m.iou[i] = static_cast<double>(inter) / static_cast<double>(uni);
    if (label[i] > 0) m.acc[i] = static_cast<double>(inter) / static_cast<double>(label[i]);
  }
  m.miou = nan_mean(m.iou);
  m.mean_acc = nan_mean(m.acc);
  m.pixel_acc = m.pixels ? static_cast<double>(correct) / static_cast<double>(m.pixels) : nan;
  return m;
}

ConfusionMeter::ConfusionMeter(int64_t num_classes, int64_t ignore_index)
    : num_classes_(num_classes),
      ignore_index_(ignore_index),
      host_counts_(static_cast<size_t>(num_classes * num_classes), 0) {
  TCV_CHECK(num_classes > 0, "[ConfusionMeter] num_classes must be positive, got ", num_classes);
}

void ConfusionMeter::update(const Tensor& pred, const Tensor& target) {
  if (device_counts_.defined() && device_counts_.device() != pred.device()) {
    // The predictions moved to another device: keep what was counted so far.
    add_counts(device_counts_.to(kCPU).to_vector<int64_t>());
    device_counts_ = Tensor();
  }
  if (!device_counts_.defined())
    device_counts_ =
        zeros({num_classes_, num_classes_}, {.dtype = DType::i64, .device = pred.device()});
  ops::confusion_matrix_add_(device_counts_, pred, target, {.ignore_index = ignore_index_});
}

std::vector<int64_t> ConfusionMeter::counts() const {
  std::vector<int64_t> out = host_counts_;
  if (device_counts_.defined()) {
    const std::vector<int64_t> d = device_counts_.to(kCPU).to_vector<int64_t>();
    for (size_t i = 0; i < out.size(); ++i) out[i] += d[i];
  }
  return out;
}

void ConfusionMeter::add_counts(const std::vector<int64_t>& counts) {
  TCV_CHECK(counts.size() == host_counts_.size(), "[ConfusionMeter] add_counts expects ",
            host_counts_.size(), " values (", num_classes_, " x ", num_classes_, "), got ",
            counts.size());
  for (size_t i = 0; i < counts.size(); ++i) host_counts_[i] += counts[i];
}

void ConfusionMeter::reset() {
  device_counts_ = Tensor();
  std::fill(host_counts_.begin(), host_counts_.end(), 0);
}

SegMetrics ConfusionMeter::compute() const {
  return seg_metrics(counts(), num_classes_);
}

}  // namespace tcv::train
