// Confusion matrices for segmentation (and classification) evaluation,
// counted on the device where the predictions are.
#include "kernels/cpu/confusion.h"

#include <string>

#include "engine/backend.h"
#include "engine/ops.h"
#include "kernels/cuda/confusion.h"

namespace tcv::ops {

namespace {

std::string position_str(const Shape& shape, int64_t flat) {
  std::string s;
  for (size_t i = shape.size(); i-- > 0;) {
    const int64_t d = shape[i] > 0 ? flat % shape[i] : 0;
    flat = shape[i] > 0 ? flat / shape[i] : 0;
    s = std::to_string(d) + (s.empty() ? "" : ", ") + s;
  }
  return "(" + s + ")";
}

}  // namespace

void confusion_matrix_add_(const Tensor& counts, const Tensor& pred, const Tensor& target,
                           const ConfusionOptions& opts) {
  TCV_CHECK(counts.defined() && counts.dim() == 2 && counts.size(0) == counts.size(1) &&
                counts.dtype() == DType::i64 && counts.is_contiguous(),
            "[confusion_matrix] counts must be a contiguous (C, C) i64 tensor, got ",
            counts.defined() ? counts.shape_str() + " " + dtype_name(counts.dtype()) : "undefined");
  const int64_t c = counts.size(0);
  TCV_CHECK(c > 0, "[confusion_matrix] needs at least one class");
  TCV_CHECK(target.dtype() == DType::i64, "[confusion_matrix] target must hold i64 labels, got ",
            dtype_name(target.dtype()), " ", target.shape_str());
  const bool logits = is_floating(pred.dtype());
  if (logits) {
    Shape want{};
    if (pred.dim() >= 2) {
      want.push_back(pred.size(0));
      for (int64_t i = 2; i < pred.dim(); ++i) want.push_back(pred.size(i));
    }
    TCV_CHECK(pred.dim() >= 2 && pred.size(1) == c && target.shape() == want,
              "[confusion_matrix] logits ", pred.shape_str(), " and target ", target.shape_str(),
              " do not match: expected logits (N, ", c, ", d1, ...) and target (N, d1, ...)");
  } else {
    TCV_CHECK(pred.dtype() == DType::i64,
              "[confusion_matrix] predictions must be i64 labels or "
              "floating logits, got ",
              dtype_name(pred.dtype()));
    TCV_CHECK(pred.shape() == target.shape(), "[confusion_matrix] predicted labels ",
              pred.shape_str(), " and target ", target.shape_str(), " differ in shape");
  }
  backend::require_device("confusion_matrix", pred.device(), {&target, &counts});
  const int64_t n = target.dim() > 0 ? target.size(0) : 1;
  const int64_t s = n > 0 ? target.numel() / n : 0;
  Tensor p = pred.detach();
  if (logits && pred.device().is_cpu() && pred.dtype() != DType::f32 && pred.dtype() != DType::f64)
    p = p.to(DType::f32);  // the CPU kernel reads f32 and f64 logits
  p = logits ? p.contiguous().view({n, c, s}) : p.contiguous().view({n, s});
  const Tensor t = target.detach().contiguous().view({n, s});
  if (t.numel() == 0) return;
  kernels::ConfusionCheck check;
  if (pred.device().is_cpu()) {
    profiler::Scope prof("confusion_matrix_add", pred.device());
    check = kernels::cpu::confusion_matrix_add(counts.k(), p.k(), t.k(), opts.ignore_index);
  } else {
    kernels::cuda::DeviceGuard guard(pred.device().index);
    profiler::Scope prof("confusion_matrix_add", pred.device());
    check = kernels::cuda::confusion_matrix_add(counts.k(), p.k(), t.k(), opts.ignore_index);
  }
  if (check.bad == 0) return;
  const int64_t tv = t.flatten().narrow(0, check.first_bad, 1).to(kCPU).item<int64_t>();
  const bool target_bad = tv != opts.ignore_index && (tv < 0 || tv >= c);
  const std::string where = position_str(target.shape(), check.first_bad);
  if (target_bad)
    TCV_THROW("[confusion_matrix] target ", tv, " at ", where, " is neither a class in [0, ", c,
              ") nor ignore_index ", opts.ignore_index, " (", check.bad, " such positions)");
  const int64_t pv = p.flatten().narrow(0, check.first_bad, 1).to(kCPU).item<int64_t>();
  TCV_THROW("[confusion_matrix] predicted label ", pv, " at ", where, " is not a class in [0, ", c,
            ") (", check.bad, " such positions)");
}

Tensor confusion_matrix(const Tensor& pred, const Tensor& target, int64_t num_classes,
                        const ConfusionOptions& opts) {
  TCV_CHECK(num_classes > 0, "[confusion_matrix] num_classes must be positive, got ", num_classes);
  Tensor counts = zeros({num_classes, num_classes}, {.dtype = DType::i64, .device = pred.device()});
  confusion_matrix_add_(counts, pred, target, opts);
  return counts;
}

}  // namespace tcv::ops
