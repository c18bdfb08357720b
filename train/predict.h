// Inference behind tcv-predict: a model rebuilt from a training config and a
// checkpoint, classifying u8 images with the config's normalisation.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/transforms.h"
#include "engine/tensor.h"
#include "layers/module.h"
#include "train/config.h"

namespace tcv::train {

/// One of the top classes for an image.
struct ClassScore {
  int64_t index = 0;
  std::string name;
  double prob = 0.0;  ///< softmax probability
};

class Predictor {
 public:
  /// Builds network.model_name for data.num_classes and loads the model weights of
  /// `checkpoint` (a .safetensors file, a checkpoint stem or a run directory).
  /// Runs on the CPU, in eval mode.
  Predictor(const Config& cfg, const std::string& checkpoint);

  /// The top-k classes (k clipped to the number of classes), best first, for a u8
  /// image (C, H, W) or (H, W), preprocessed as validation images are
  /// (val.aug.resize_shorter, val.aug.center_crop, then a resize to
  /// input_height() x input_width() = data.input_size when still needed); colour
  /// images given to a one-channel model are converted to grayscale, and gray ones
  /// replicated for three channels.
  std::vector<ClassScore> predict(const Tensor& image, int64_t k = 5) const;
  /// The same for a batch of images of the model's size, u8 (N, C, H, W).
  std::vector<std::vector<ClassScore>> predict_batch(const Tensor& images, int64_t k = 5) const;

  int64_t in_channels() const { return channels_; }
  int64_t input_height() const { return height_; }
  int64_t input_width() const { return width_; }
  const std::vector<std::string>& class_names() const { return names_; }
  const std::string& checkpoint() const { return stem_; }

 private:
  std::shared_ptr<nn::Module> model_;
  std::vector<std::string> names_;
  std::vector<double> mean_, std_;
  double div_ = 255.0;
  int64_t channels_ = 1, height_ = 28, width_ = 28;
  data::Transform preprocess_;  // u8 (C, H, W) -> u8 (C, height_, width_)
  std::string stem_;
};

}  // namespace tcv::train
