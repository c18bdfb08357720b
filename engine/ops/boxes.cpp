// Detection ops: box IoU, NMS and SSD matching dispatch to kernels/{cpu,cuda}/
// boxes; box coding is composed of elementwise ops (differentiable, on every
// device); l2_normalize is one fused pass with its backward beside it.
#include "engine/ops/boxes.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/ops.h"
#include "kernels/cpu/boxes.h"
#include "kernels/cuda/boxes.h"

namespace tcv::ops {

namespace {

void check_boxes(const char* op, const char* what, const Tensor& t) {
  TCV_CHECK(t.dim() == 2 && t.size(1) == 4, "[", op, "] ", what,
            " must be (N, 4) boxes [x1, y1, x2, y2], got ", t.shape_str());
  TCV_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::f64, "[", op, "] ", what,
            " must be f32 or f64, got ", dtype_name(t.dtype()));
}

// Column k of (K, 4) boxes or codes, as a (K) view.
Tensor col(const Tensor& t, int64_t k) {
  return t.select(1, k);
}

}  // namespace

Tensor box_iou(const Tensor& a, const Tensor& b) {
  check_boxes("box_iou", "a", a);
  check_boxes("box_iou", "b", b);
  TCV_CHECK(a.dtype() == b.dtype(), "[box_iou] a is ", dtype_name(a.dtype()), ", b ",
            dtype_name(b.dtype()));
  backend::require_device("box_iou", a.device(), {&b});
  Tensor ac = a.detach().contiguous(), bc = b.detach().contiguous();
  Tensor out = empty({a.size(0), b.size(0)}, {.dtype = a.dtype(), .device = a.device()});
  TCV_KERNEL(a.device(), box_iou, out.strided_desc(), ac.strided_desc(), bc.strided_desc());
  return out;
}

Tensor nms(const Tensor& boxes, const Tensor& scores, double iou_threshold) {
  check_boxes("nms", "boxes", boxes);
  TCV_CHECK(scores.dim() == 1 && scores.size(0) == boxes.size(0), "[nms] scores must be (",
            boxes.size(0), ") for boxes ", boxes.shape_str(), ", got ", scores.shape_str());
  TCV_CHECK(scores.dtype() == boxes.dtype(), "[nms] boxes are ", dtype_name(boxes.dtype()),
            ", scores ", dtype_name(scores.dtype()));
  TCV_CHECK(boxes.size(0) <= std::numeric_limits<int32_t>::max(),
            "[nms] at most 2^31 - 1 boxes, got ", boxes.size(0));
  backend::require_device("nms", boxes.device(), {&scores});
  Tensor bc = boxes.detach().contiguous(), sc = scores.detach().contiguous();
  Tensor keep = empty({boxes.size(0)}, {.dtype = DType::i64, .device = boxes.device()});
  int64_t k = 0;
  TCV_KERNEL(boxes.device(), nms, keep.strided_desc(), bc.strided_desc(), sc.strided_desc(),
             iou_threshold, &k);
  return keep.narrow(0, 0, k);
}

Tensor batched_nms(const Tensor& boxes, const Tensor& scores, const Tensor& idxs,
                   double iou_threshold) {
  check_boxes("batched_nms", "boxes", boxes);
  TCV_CHECK(idxs.dim() == 1 && idxs.size(0) == boxes.size(0), "[batched_nms] idxs must be (",
            boxes.size(0), ") for boxes ", boxes.shape_str(), ", got ", idxs.shape_str());
  if (boxes.size(0) == 0) return empty({0}, {.dtype = DType::i64, .device = boxes.device()});
  NoGradGuard no_grad;
  const Tensor b = boxes.detach();
  const int64_t n = b.size(0);
  if (n <= 1000) {
    // torchvision: offsets = idxs.to(boxes) * (boxes.max() + 1), in the boxes' dtype.
    const Tensor offsets = mul(idxs.to(b.dtype()), add(max(b), 1.0));  // (N)
    return nms(add(b, offsets.unsqueeze(1)), scores, iou_threshold);
  }
  // torchvision's _batched_nms_vanilla: one NMS per category.
  const std::vector<int64_t> cat = idxs.to(kCPU).to(DType::i64).contiguous().to_vector<int64_t>();
  const std::vector<double> s = scores.to(kCPU).to(DType::f64).contiguous().to_vector<double>();
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
    return cat[static_cast<size_t>(x)] < cat[static_cast<size_t>(y)];
  });
  std::vector<int64_t> kept;
  for (size_t lo = 0; lo < order.size();) {
    size_t hi = lo;
    while (hi < order.size() &&
           cat[static_cast<size_t>(order[hi])] == cat[static_cast<size_t>(order[lo])])
      ++hi;
    const std::vector<int64_t> members(order.begin() + static_cast<std::ptrdiff_t>(lo),
                                       order.begin() + static_cast<std::ptrdiff_t>(hi));
    const Tensor idx =
        from_vector<int64_t>(members, {static_cast<int64_t>(members.size())}, b.device());
    const Tensor keep = nms(index_select(b, 0, idx), index_select(scores, 0, idx), iou_threshold);
    for (int64_t k : keep.to(kCPU).to_vector<int64_t>())
      kept.push_back(members[static_cast<size_t>(k)]);
    lo = hi;
  }
  std::sort(kept.begin(), kept.end());  // torch.where(keep_mask): by index
  std::stable_sort(kept.begin(), kept.end(), [&](int64_t x, int64_t y) {
    return s[static_cast<size_t>(x)] > s[static_cast<size_t>(y)];
  });
  return from_vector<int64_t>(kept, {static_cast<int64_t>(kept.size())}, b.device());
}

Tensor ssd_match(const Tensor& iou, double threshold) {
  TCV_CHECK(iou.dim() == 2, "[ssd_match] iou must be (ground truths, anchors), got ",
            iou.shape_str());
  TCV_CHECK(iou.dtype() == DType::f32 || iou.dtype() == DType::f64,
            "[ssd_match] iou must be f32 or f64, got ", dtype_name(iou.dtype()));
  Tensor q = iou.detach().contiguous();
  Tensor matches = empty({iou.size(1)}, {.dtype = DType::i64, .device = iou.device()});
  TCV_KERNEL(iou.device(), ssd_match, matches.strided_desc(), q.strided_desc(), threshold);
  return matches;
}

Tensor encode_boxes(const Tensor& boxes, const Tensor& anchors, const BoxCoderWeights& w) {
  check_boxes("encode_boxes", "boxes", boxes);
  check_boxes("encode_boxes", "anchors", anchors);
  TCV_CHECK(boxes.size(0) == anchors.size(0), "[encode_boxes] ", boxes.shape_str(), " boxes for ",
            anchors.shape_str(), " anchors");
  // torchvision's encode_boxes, operation for operation.
  const Tensor ex_w = col(anchors, 2) - col(anchors, 0);
  const Tensor ex_h = col(anchors, 3) - col(anchors, 1);
  const Tensor ex_cx = col(anchors, 0) + ex_w * 0.5;
  const Tensor ex_cy = col(anchors, 1) + ex_h * 0.5;
  const Tensor gt_w = col(boxes, 2) - col(boxes, 0);
  const Tensor gt_h = col(boxes, 3) - col(boxes, 1);
  const Tensor gt_cx = col(boxes, 0) + gt_w * 0.5;
  const Tensor gt_cy = col(boxes, 1) + gt_h * 0.5;
  const Tensor dx = (gt_cx - ex_cx) * w.x / ex_w;
  const Tensor dy = (gt_cy - ex_cy) * w.y / ex_h;
  const Tensor dw = log(gt_w / ex_w) * w.w;
  const Tensor dh = log(gt_h / ex_h) * w.h;
  return stack({dx, dy, dw, dh}, 1);
}

Tensor decode_boxes(const Tensor& codes, const Tensor& anchors, const BoxCoderWeights& w,
                    double clip) {
  check_boxes("decode_boxes", "codes", codes);
  check_boxes("decode_boxes", "anchors", anchors);
  TCV_CHECK(codes.size(0) == anchors.size(0), "[decode_boxes] ", codes.shape_str(), " codes for ",
            anchors.shape_str(), " anchors");
  const Tensor a = anchors.dtype() == codes.dtype() ? anchors : cast(anchors, codes.dtype());
  // torchvision's BoxCoder.decode_single, operation for operation.
  const Tensor widths = col(a, 2) - col(a, 0);
  const Tensor heights = col(a, 3) - col(a, 1);
  const Tensor ctr_x = col(a, 0) + widths * 0.5;
  const Tensor ctr_y = col(a, 1) + heights * 0.5;
  const Tensor dx = col(codes, 0) / w.x;
  const Tensor dy = col(codes, 1) / w.y;
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor dw = clamp(col(codes, 2) / w.w, -inf, clip);
  const Tensor dh = clamp(col(codes, 3) / w.h, -inf, clip);
  const Tensor pcx = dx * widths + ctr_x;
  const Tensor pcy = dy * heights + ctr_y;
  const Tensor half_w = exp(dw) * widths * 0.5;
  const Tensor half_h = exp(dh) * heights * 0.5;
  return stack({pcx - half_w, pcy - half_h, pcx + half_w, pcy + half_h}, 1);
}

Tensor l2_normalize(const Tensor& x, int64_t dim, double eps) {
  // A norm needs f32's range and precision: under autocast 16-bit inputs are
  // normalized in f32 (as PyTorch's autocast runs norms in f32).
  if (autocast::needs_f32(x)) return l2_normalize(x.to(DType::f32), dim, eps);
  TCV_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64,
            "[l2_normalize] input must be f32 or f64, got ", dtype_name(x.dtype()), " ",
            x.shape_str());
  TCV_CHECK(eps > 0.0, "[l2_normalize] eps must be positive, got ", eps);
  TCV_CHECK(x.dim() >= 1, "[l2_normalize] needs at least one dim, got a 0-d tensor");
  const int64_t d = x.wrap_dim(dim, "l2_normalize");
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= x.size(i);
  for (int64_t i = d + 1; i < x.dim(); ++i) inner *= x.size(i);
  const int64_t c = x.size(d);
  Tensor xc = x.detach().contiguous();
  Tensor y = empty(x.shape(), {.dtype = x.dtype(), .device = x.device()});
  Tensor norm = empty({outer, inner}, {.dtype = x.dtype(), .device = x.device()});
  TCV_KERNEL(x.device(), l2_normalize, y.strided_desc(), norm.strided_desc(), xc.strided_desc(),
             outer, c, inner, eps);
  if (autograd::needs_grad({&x}))
    autograd::record("l2_normalize", {x}, {y},
                     [sy = SavedTensor(y), norm, outer, c, inner, eps](std::vector<Tensor>& g) {
                       Tensor yv = sy.get();
                       Tensor dy = g[0].contiguous();
                       Tensor dx = empty_like(yv);
                       TCV_KERNEL(yv.device(), l2_normalize_backward, dx.strided_desc(),
                                  dy.strided_desc(), yv.strided_desc(), norm.strided_desc(), outer,
                                  c, inner, eps);
                       return std::vector<Tensor>{dx};
                     });
  return y;
}

}  // namespace tcv::ops
