// SSD's default boxes (anchors), as torchvision's DefaultBoxGenerator makes
// them or as TorchCV's SSDPriorBoxLayer does, with TorchCV's key names for
// the settings a config gives.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "engine/tensor.h"

namespace tcv::models::det {

/// Whether the anchors' widths and heights are clipped to [0, 1] of the image
/// (in centre form, before conversion to corners), as torchvision's clip=True.
enum class AnchorClip : uint8_t { clip, none };

/// Where the default boxes sit and how big they are.
enum class AnchorLayout : uint8_t {
  /// torchvision's DefaultBoxGenerator: centres (j + 0.5) / (image / step)
  /// of the image (steps: network.stride_list, else the map's grid), sides
  /// scales[k] of the image, clipped to it as AnchorOptions::clip says.
  torchvision,
  /// TorchCV's SSDPriorBoxLayer (model/det/layers/ssd_priorbox_layer.py):
  /// stride image / map (a fraction: 300 / 38), centres j * stride + stride / 2
  /// (numpy's arange, in f64, then f32), sides sizes_px[k] in pixels, never
  /// clipped; the same boxes per location in the same order.
  torchcv,
};

/// How the default boxes of each feature map are laid out.
struct AnchorOptions {
  AnchorLayout layout = AnchorLayout::torchvision;
  /// AnchorLayout::torchcv: TorchCV's anchor.cur_anchor_sizes in pixels, one
  /// per feature map plus one.
  std::vector<double> sizes_px{};
  /// Extra aspect ratios per feature map (TorchCV's anchor.aspect_ratio_list):
  /// each ratio r adds a box of width s·√r and height s/√r and its transpose to
  /// the two square boxes of side s_k and √(s_k·s_{k+1}).
  std::vector<std::vector<double>> aspect_ratios;
  /// Box scales relative to the image side, one per feature map plus one
  /// (TorchCV's anchor.cur_anchor_sizes divided by the input size). Empty: from
  /// min_ratio to max_ratio evenly, then 1, as torchvision.
  std::vector<double> scales;
  double min_ratio = 0.15;
  double max_ratio = 0.9;
  /// Pixels between anchor centres on each map (TorchCV's network.stride_list);
  /// empty: the map's own grid spacing.
  std::vector<int64_t> steps;
  AnchorClip clip = AnchorClip::clip;
};

/// torchvision's ssd300_vgg16: ratios [[2], [2, 3], [2, 3], [2, 3], [2], [2]],
/// scales 0.07, 0.15, 0.33, 0.51, 0.69, 0.87, 1.05, steps 8, 16, 32, 64, 100, 300.
AnchorOptions ssd300_anchor_options();
/// The SSD paper's SSD512 as TorchCV ships it: ratios [[2], [2, 3], [2, 3],
/// [2, 3], [2, 3], [2], [2]], anchor sizes 35, 76, 153, 230, 307, 384, 460, 537
/// pixels of 512, steps 8, 16, 32, 64, 128, 256, 512.
AnchorOptions ssd512_anchor_options();

/// Boxes per location of feature map k: 2 + 2 · (number of its aspect ratios).
int64_t anchors_per_location(const AnchorOptions& o, size_t k);
/// The scales actually used (o.scales, or the ones min_ratio/max_ratio give).
std::vector<double> anchor_scales(const AnchorOptions& o);

/// Default boxes (A, 4) [x1, y1, x2, y2] in pixels of an image of
/// image_hw = (height, width) for feature maps of the given (height, width), in
/// the order the SSD heads emit their predictions: map, row, column, box.
/// Centres and sides are computed in f32 as the reference computes them (so
/// the f32 boxes equal torchvision's anchors, or TorchCV's prior boxes turned
/// into corners), the corners in `dtype` (f32 or f64: torchvision's generator
/// does that arithmetic in the model's dtype).
Tensor default_boxes(const AnchorOptions& o,
                     const std::vector<std::array<int64_t, 2>>& feature_sizes,
                     std::array<int64_t, 2> image_hw, DType dtype = DType::f32);

}  // namespace tcv::models::det
