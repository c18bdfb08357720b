#include "models/det/multibox_loss.h"

#include <cmath>
#include <limits>

#include "engine/autograd.h"
#include "engine/ops.h"

namespace tcv::models::det {

namespace {

void check_target(const DetTarget& t, size_t image, int64_t num_classes) {
  TCV_CHECK(t.boxes.defined() && t.labels.defined(), "[multibox_loss] image ", image,
            ": target boxes and labels must both be given");
  TCV_CHECK(t.boxes.dim() == 2 && t.boxes.size(1) == 4, "[multibox_loss] image ", image,
            ": boxes must be (n, 4) [x1, y1, x2, y2], got ", t.boxes.shape_str());
  TCV_CHECK(
      t.labels.dim() == 1 && t.labels.size(0) == t.boxes.size(0) && t.labels.dtype() == DType::i64,
      "[multibox_loss] image ", image, ": labels must be (", t.boxes.size(0), ") i64 for boxes ",
      t.boxes.shape_str(), ", got ", t.labels.shape_str(), " ", dtype_name(t.labels.dtype()));
  TCV_CHECK(is_floating(t.boxes.dtype()), "[multibox_loss] image ", image,
            ": boxes must be floating point, got ", dtype_name(t.boxes.dtype()));
  if (!t.boxes.device().is_cpu()) return;  // checked where they were made
  const std::vector<double> b = t.boxes.to_vector<double>();
  const std::vector<int64_t> l = t.labels.to_vector<int64_t>();
  for (size_t i = 0; i < l.size(); ++i) {
    const double* r = b.data() + 4 * i;
    TCV_CHECK(std::isfinite(r[0]) && std::isfinite(r[1]) && std::isfinite(r[2]) &&
                  std::isfinite(r[3]) && r[2] > r[0] && r[3] > r[1],
              "[multibox_loss] image ", image, ", box ", i, ": [", r[0], ", ", r[1], ", ", r[2],
              ", ", r[3], "] must be finite with x1 < x2 and y1 < y2");
    TCV_CHECK(l[i] >= 1 && l[i] < num_classes, "[multibox_loss] image ", image, ", box ", i,
              ": label ", l[i], " is outside the object classes 1..", num_classes - 1,
              " (0 is the background)");
  }
}

}  // namespace

Tensor MultiBoxLosses::total() const {
  return ops::add(bbox_regression, classification);
}

MultiBoxLosses multibox_loss(const Tensor& loc, const Tensor& conf, const Tensor& anchors,
                             const std::vector<DetTarget>& targets, const MultiBoxLossOptions& o) {
  TCV_CHECK(loc.dim() == 3 && loc.size(2) == 4, "[multibox_loss] loc must be (N, A, 4), got ",
            loc.shape_str());
  TCV_CHECK(conf.dim() == 3 && conf.size(0) == loc.size(0) && conf.size(1) == loc.size(1),
            "[multibox_loss] conf must be (N, A, C) for loc ", loc.shape_str(), ", got ",
            conf.shape_str());
  TCV_CHECK(anchors.dim() == 2 && anchors.size(0) == loc.size(1) && anchors.size(1) == 4,
            "[multibox_loss] anchors must be (", loc.size(1), ", 4) for loc ", loc.shape_str(),
            ", got ", anchors.shape_str());
  const int64_t n = loc.size(0), a = loc.size(1), c = conf.size(2);
  TCV_CHECK(static_cast<int64_t>(targets.size()) == n, "[multibox_loss] ", targets.size(),
            " targets for a batch of ", n, " images");
  TCV_CHECK(o.neg_pos_ratio >= 0, "[multibox_loss] neg_pos_ratio must be >= 0, got ",
            o.neg_pos_ratio);
  for (size_t i = 0; i < targets.size(); ++i) check_target(targets[i], i, c);
  const Device dev = loc.device();
  const DType dt = loc.dtype();

  // Matching and regression targets: no gradient flows through them.
  Tensor matched, cls_t, reg_t;  // (N, A) bool, (N, A) i64, (N, A, 4)
  {
    NoGradGuard no_grad;
    const Tensor anc = anchors.detach().to(dev).to(dt);
    std::vector<Tensor> pos_rows, cls_rows, reg_rows;
    for (const DetTarget& t : targets) {
      const Tensor boxes = t.boxes.detach().to(dev).to(dt);
      const Tensor labels = t.labels.to(dev);
      if (boxes.size(0) == 0) {
        pos_rows.push_back(zeros({a}, {.dtype = DType::b8, .device = dev}));
        cls_rows.push_back(zeros({a}, {.dtype = DType::i64, .device = dev}));
        reg_rows.push_back(zeros({a, 4}, {.dtype = dt, .device = dev}));
        continue;
      }
      const Tensor m = ops::ssd_match(ops::box_iou(boxes, anc), o.iou_threshold);  // (A)
      const Tensor pos = ops::gt(m, -1.0);
      const Tensor idx = ops::where(pos, m, zeros_like(m));
      pos_rows.push_back(pos);
      cls_rows.push_back(ops::where(pos, ops::index_select(labels, 0, idx), zeros_like(m)));
      reg_rows.push_back(ops::encode_boxes(ops::index_select(boxes, 0, idx), anc, o.weights));
    }
    matched = ops::stack(pos_rows, 0);
    cls_t = ops::stack(cls_rows, 0);
    reg_t = ops::stack(reg_rows, 0);
  }
  const Tensor matched_f = matched.to(dt);  // (N, A)
  const int64_t num_matched = static_cast<int64_t>(ops::sum(matched_f).item());
  const double norm = 1.0 / static_cast<double>(std::max<int64_t>(1, num_matched));

  // Smooth-L1 (beta 1) summed over the coordinates of matched anchors.
  const Tensor box_terms = ops::smooth_l1_loss(loc, reg_t, ops::Reduction::none);  // (N, A, 4)
  const Tensor bbox = ops::mul(ops::sum(ops::mul(box_terms, matched_f.unsqueeze(2))), norm);

  // Cross-entropy of every anchor; positives (label > 0) plus the hardest
  // negatives: those ranked below ratio · positives of their image by loss.
  const Tensor ce =
      ops::cross_entropy(conf.reshape({n * a, c}), cls_t.reshape({n * a}), ops::Reduction::none)
          .view({n, a});
  Tensor weight;  // (N, A): 1 per positive, + 1 per selected negative
  {
    NoGradGuard no_grad;
    const Tensor fg = ops::gt(cls_t, 0.0);  // (N, A)
    const Tensor fg_f = fg.to(dt);
    const Tensor num_neg = ops::mul(ops::sum(fg_f, {1}, true), o.neg_pos_ratio);  // (N, 1)
    const Tensor neg_loss =
        ops::masked_fill(ce.detach(), fg, -std::numeric_limits<double>::infinity());
    const Tensor order = ops::sort(neg_loss, 1, true).second;  // (N, A) anchor at each rank
    const Tensor rank = arange(0.0, static_cast<double>(a), 1.0, {.dtype = dt, .device = dev});
    const Tensor chosen = ops::lt(rank.unsqueeze(0), num_neg).to(dt);  // (N, A) by rank
    const Tensor bg = ops::scatter_add(zeros({n, a}, {.dtype = dt, .device = dev}), 1, order,
                                       chosen);  // (N, A) by anchor
    weight = ops::add(fg_f, bg);
  }
  const Tensor cls = ops::mul(ops::sum(ops::mul(ce, weight)), norm);
  return {bbox, cls, num_matched};
}

}  // namespace tcv::models::det
