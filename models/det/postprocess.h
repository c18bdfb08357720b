// SSD's post-processing as torchvision's SSD.postprocess_detections: softmax
// scores, boxes decoded from the default boxes and clipped to the image, per
// class the boxes above a score threshold (at most top_k of them), class-wise
// NMS, and the best detections of each image.
#pragma once

#include <array>
#include <vector>

#include "engine/ops/boxes.h"
#include "engine/tensor.h"

namespace tcv::models::det {

/// TorchCV's names in brackets.
/// Which candidates top_k counts.
enum class TopKScope : uint8_t {
  per_class,  ///< the k highest scores of each class (torchvision's topk_candidates)
  per_image,  ///< the k highest (box, class) scores of the image (TorchCV's res.nms.pre_nms)
};

struct DetectionOptions {
  /// Candidates need a score above this (res.val_conf_thre).
  double score_threshold = 0.01;
  /// Candidates kept before NMS, the highest scores (res.nms.pre_nms), per
  /// class or per image as top_k_scope says.
  int64_t top_k = 400;
  TopKScope top_k_scope = TopKScope::per_class;
  /// Detections kept per class after NMS, the highest scores (TorchCV's
  /// res.cls_keep_num); 0: all.
  int64_t keep_per_class = 0;
  /// A box is suppressed by a higher-scoring one of its class above this IoU
  /// (res.nms.max_threshold).
  double nms_threshold = 0.45;
  /// Detections kept per image, the highest scores (res.max_per_image).
  int64_t max_detections = 200;
  /// Box-code weights (x, y, w, h).
  ops::BoxCoderWeights weights = {};
};

/// One image's detections, in decreasing score order, on the CPU.
struct Detections {
  Tensor boxes;   ///< (K, 4) f32 [x1, y1, x2, y2] in pixels of the network input
  Tensor scores;  ///< (K) f32
  Tensor labels;  ///< (K) i64, 1 .. C − 1
};

/// Detections of every image from loc (N, A, 4) and conf (N, A, C) over default
/// boxes `anchors` (A, 4), for an input of image_hw = (height, width). Runs on
/// the CPU (inputs on another device are copied there first).
std::vector<Detections> postprocess_detections(const Tensor& loc, const Tensor& conf,
                                               const Tensor& anchors,
                                               std::array<int64_t, 2> image_hw,
                                               const DetectionOptions& options = {});

}  // namespace tcv::models::det
