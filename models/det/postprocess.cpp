#include "models/det/postprocess.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/autograd.h"
#include "engine/ops.h"

namespace tcv::models::det {

namespace {

// torch.clamp(v, lo, hi): NaN stays NaN.
float clamp_to(float v, float hi) {
  return v != v ? v : std::min(std::max(v, 0.0f), hi);
}

}  // namespace

std::vector<Detections> postprocess_detections(const Tensor& loc, const Tensor& conf,
                                               const Tensor& anchors,
                                               std::array<int64_t, 2> image_hw,
                                               const DetectionOptions& o) {
  TCV_CHECK(loc.dim() == 3 && loc.size(2) == 4 && conf.dim() == 3 && conf.size(0) == loc.size(0) &&
                conf.size(1) == loc.size(1),
            "[postprocess_detections] expects loc (N, A, 4) and conf (N, A, C), got ",
            loc.shape_str(), " and ", conf.shape_str());
  TCV_CHECK(anchors.dim() == 2 && anchors.size(0) == loc.size(1),
            "[postprocess_detections] anchors must be (", loc.size(1), ", 4), got ",
            anchors.shape_str());
  TCV_CHECK(o.top_k >= 0 && o.max_detections >= 0,
            "[postprocess_detections] top_k and max_detections must be >= 0, got ", o.top_k,
            " and ", o.max_detections);
  NoGradGuard no_grad;
  const int64_t n = loc.size(0), a = loc.size(1), c = conf.size(2);
  const Tensor loc_c = loc.detach().to(kCPU).to(DType::f32).contiguous();
  const Tensor scores_all =
      ops::softmax(conf.detach().to(kCPU).to(DType::f32), -1).contiguous();  // (N, A, C)
  const Tensor anc = anchors.detach().to(kCPU).to(DType::f32).contiguous();
  const float img_h = static_cast<float>(image_hw[0]), img_w = static_cast<float>(image_hw[1]);

  std::vector<Detections> out;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<float> boxes = ops::decode_boxes(loc_c.select(0, i), anc, o.weights)
                                   .contiguous()
                                   .to_vector<float>();  // (A, 4)
    for (int64_t j = 0; j < a; ++j) {
      float* r = boxes.data() + 4 * j;
      r[0] = clamp_to(r[0], img_w);
      r[1] = clamp_to(r[1], img_h);
      r[2] = clamp_to(r[2], img_w);
      r[3] = clamp_to(r[3], img_h);
    }
    const float* s = scores_all.data<float>() + i * a * c;
    std::vector<float> cand_boxes, cand_scores;
    std::vector<int64_t> cand_labels, idx;
    // Keeps the k highest of idx (flat (box, class) indices j * c + label), in
    // decreasing score order, ties to the lower index.
    auto take_top = [&](int64_t k) {
      k = std::min<int64_t>(k, static_cast<int64_t>(idx.size()));
      std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int64_t x, int64_t y) {
        return s[x] > s[y] || (s[x] == s[y] && x < y);
      });
      for (int64_t t = 0; t < k; ++t) {
        const int64_t j = idx[t] / c, label = idx[t] % c;
        cand_boxes.insert(cand_boxes.end(), boxes.begin() + 4 * j, boxes.begin() + 4 * j + 4);
        cand_scores.push_back(s[idx[t]]);
        cand_labels.push_back(label);
      }
    };
    if (o.top_k_scope == TopKScope::per_class) {
      for (int64_t label = 1; label < c; ++label) {
        idx.clear();
        for (int64_t j = 0; j < a; ++j)
          if (static_cast<double>(s[j * c + label]) > o.score_threshold)
            idx.push_back(j * c + label);
        take_top(o.top_k);
      }
    } else {
      idx.clear();
      for (int64_t j = 0; j < a; ++j)
        for (int64_t label = 1; label < c; ++label)
          if (static_cast<double>(s[j * c + label]) > o.score_threshold)
            idx.push_back(j * c + label);
      take_top(o.top_k);
    }
    const int64_t m = static_cast<int64_t>(cand_scores.size());
    const Tensor bt = from_vector<float>(cand_boxes, {m, 4});
    const Tensor st = from_vector<float>(cand_scores, {m});
    const Tensor lt = from_vector<int64_t>(cand_labels, {m});
    Tensor keep = ops::batched_nms(bt, st, lt, o.nms_threshold);  // by decreasing score
    if (o.keep_per_class > 0) {
      std::vector<int64_t> kept, per_label(static_cast<size_t>(c), 0);
      for (int64_t k : keep.to_vector<int64_t>())
        if (per_label[static_cast<size_t>(cand_labels[static_cast<size_t>(k)])]++ <
            o.keep_per_class)
          kept.push_back(k);
      keep = from_vector<int64_t>(kept, {static_cast<int64_t>(kept.size())});
    }
    keep = keep.narrow(0, 0, std::min(o.max_detections, keep.size(0)));
    out.push_back({ops::index_select(bt, 0, keep), ops::index_select(st, 0, keep),
                   ops::index_select(lt, 0, keep)});
  }
  return out;
}

}  // namespace tcv::models::det
