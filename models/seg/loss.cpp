#include "models/seg/loss.h"

#include "engine/ops/elementwise.h"

namespace tcv::models::seg {

SegLossTerms seg_loss(const SegOutput& out, const Tensor& target, const SegLossOptions& o) {
  TCV_CHECK(out.out.defined(), "[seg_loss] the main output is undefined");
  TCV_CHECK(out.out.dim() == 4 && target.dim() == 3 && target.size(0) == out.out.size(0) &&
                target.size(1) == out.out.size(2) && target.size(2) == out.out.size(3),
            "[seg_loss] target ", target.shape_str(), " does not match the output ",
            out.out.shape_str(), ": expected (N, H, W) at the output's size");
  auto ce = [&](const Tensor& logits) {
    return ops::cross_entropy(logits, target, ops::Reduction::mean, o.ignore_index, 0.0,
                              o.class_weight);
  };
  SegLossTerms t;
  t.main = o.kind == SegLossKind::ohem_ce ? ops::ohem_cross_entropy(out.out, target,
                                                                    {.thresh = o.ohem_thresh,
                                                                     .min_kept = o.ohem_min_kept,
                                                                     .ignore_index = o.ignore_index,
                                                                     .weight = o.class_weight})
                                          : ce(out.out);
  t.total = o.seg_weight == 1.0 ? t.main : ops::mul(t.main, o.seg_weight);
  if (out.aux.defined()) {
    t.aux = ce(out.aux);
    if (o.aux_weight != 0.0) t.total = ops::add(t.total, t.aux, o.aux_weight);
  }
  return t;
}

}  // namespace tcv::models::seg
