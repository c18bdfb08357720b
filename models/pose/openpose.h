// OpenPose (Cao et al., CVPR 2017) as TorchCV builds it (model/pose/nets/
// open_pose.py on the vgg19 backbone): VGG-19's first ten convolutions
// (output stride 8), the CPM adapter, then an initial stage and five
// refinement stages of two branches, part-affinity fields (L1) and keypoint
// heatmaps (L2). Every stage's outputs are returned, so each is supervised.
//
//   features.{0..22}       VGG-19 conv1_1 .. relu4_2, torchvision's indices and
//                          names, so converted ImageNet weights load directly
//   model0.{0,2}           conv4_3_CPM 3x3 512->256, conv4_4_CPM 3x3 256->128 (+ReLU)
//   model1_1.{0..8}        stage 1 PAF branch: 3x 3x3 128, 1x1 512, 1x1 -> 38
//   model1_2.{0..8}        stage 1 heatmap branch: the same -> 19
//   model{2..6}_{1,2}.{0..12}  refinement: 5x 7x7 128 on cat(paf, heatmap,
//                          model0's features), 1x1 128, 1x1 -> 38 / 19
//
// The COCO set-up is TorchCV's (configs/pose/coco/openpose_vgg19_coco_pose.conf):
// 18 keypoints in OpenPose's order (COCO's 17 plus the neck, the midpoint of
// the shoulders) and a background channel, so 19 heatmaps; 19 limbs, so 38
// PAF channels (x then y per limb). The full model has 52,311,446 parameters.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "layers/layers.h"

namespace tcv::models::pose {

/// Whether the backbone's convolutions are followed by BatchNorm.
enum class PoseNorm : uint8_t {
  none,        ///< TorchCV's and the paper's OpenPose
  batch_norm,  ///< conv (no bias), BatchNorm, ReLU in the backbone: trains from scratch faster
};

/// How the convolutions start.
enum class PoseInit : uint8_t {
  torchcv,          ///< backbone kaiming_normal_(fan_out, relu) as torchvision's VGG; the
                    ///< stages normal_(0, 0.01), biases 0, as TorchCV's PoseModel
  pytorch_default,  ///< the layers' own PyTorch defaults
};

struct OpenPoseOptions {
  int64_t in_channels = 3;
  /// Part-affinity-field channels: two per limb (TorchCV's network.paf_out).
  int64_t paf_channels = 38;
  /// Heatmap channels: keypoints plus background (TorchCV's network.heatmap_out).
  int64_t heatmap_channels = 19;
  /// Refinement stages after the initial one (5 in the paper and TorchCV).
  int64_t refinement_stages = 5;
  /// Every channel count of the backbone, the CPM adapter and the stages is
  /// divided by this: 1 is OpenPose; 4 costs about 1/16 of its FLOPs.
  int64_t width_divisor = 1;
  /// Kernel of the refinement stages' first five convolutions (7 in OpenPose).
  int64_t refinement_kernel = 7;
  PoseNorm norm = PoseNorm::none;
  PoseInit init = PoseInit::torchcv;
};

/// Each stage's two outputs, first stage first, all (N, C, H/8, W/8).
struct PoseOutput {
  std::vector<Tensor> pafs;      ///< (N, paf_channels, h, w) per stage
  std::vector<Tensor> heatmaps;  ///< (N, heatmap_channels, h, w) per stage
};

class OpenPose : public nn::Module {
 public:
  explicit OpenPose(OpenPoseOptions opts = {});

  /// Every stage's PAFs and heatmaps.
  PoseOutput forward_stages(const Tensor& x);
  /// The last stage's outputs in one tensor (N, paf_channels +
  /// heatmap_channels, h, w): PAFs, then heatmaps (the Module interface).
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "OpenPose"; }

  /// The output stride (8).
  static constexpr int64_t stride = 8;

  OpenPoseOptions options;
  std::shared_ptr<nn::Sequential> features;  // VGG-19 conv1_1 .. relu4_2
  std::shared_ptr<nn::Sequential> model0;    // the CPM adapter
  /// stages[s] = {PAF branch, heatmap branch}; registered as model{s+1}_1 and
  /// model{s+1}_2.
  std::vector<std::pair<std::shared_ptr<nn::Sequential>, std::shared_ptr<nn::Sequential>>> stages;
};

/// OpenPose on VGG-19 as TorchCV: 52,311,446 parameters at 38 PAF and 19
/// heatmap channels.
std::shared_ptr<OpenPose> openpose_vgg19(OpenPoseOptions opts = {});

/// A model for CPUs and generated scenes: a quarter of every channel count,
/// BatchNorm in the backbone, two refinement stages (three stages in all).
std::shared_ptr<OpenPose> openpose_lite(OpenPoseOptions opts = {});

/// TorchCV's loss weights (loss.loss_weights.openpose_loss): one per stage
/// and branch; an empty vector means 1 for every stage.
struct OpenPoseLossOptions {
  std::vector<double> paf_weights{};
  std::vector<double> heatmap_weights{};
};

/// The total and its parts (0-d tensors).
struct OpenPoseLossTerms {
  Tensor total;    ///< Σ_stages (w_paf·paf + w_heat·heatmap), what backward starts from
  Tensor paf;      ///< the PAF losses summed over stages (unweighted)
  Tensor heatmap;  ///< the heatmap losses summed over stages (unweighted)
};

/// TorchCV's OpenPose loss: per stage and branch, MSELoss(reduction='sum')
/// between output·mask and target·mask, divided by the batch size, summed
/// over stages with their weights. paf_target (N, paf_channels, h, w),
/// heatmap_target (N, heatmap_channels, h, w), mask (N, 1, h, w) (or the
/// outputs' shape): 0 where crowds and unannotated people are, else 1.
OpenPoseLossTerms openpose_loss(const PoseOutput& out, const Tensor& paf_target,
                                const Tensor& heatmap_target, const Tensor& mask,
                                const OpenPoseLossOptions& opts = {});

/// Registers openpose (openpose_vgg19) and openpose_lite (models/registry.h,
/// family "pose", built from OpenPoseOptions:
/// models::create_family_model<OpenPose>(name, opts)).
void register_openpose_models();

}  // namespace tcv::models::pose
