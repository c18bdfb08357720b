#include "train/predict.h"

#include <algorithm>

#include "data/transforms.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "train/data_setup.h"
#include "train/report.h"
#include "train/task.h"

namespace tcv::train {

Predictor::Predictor(const Config& cfg, const std::string& checkpoint) {
  cfg.validate();
  const ClsConfig cls = parse_cls_config(cfg);
  const InputSpec in = input_spec(cfg, cls);
  channels_ = in.channels;
  height_ = in.height;
  width_ = in.width;
  preprocess_ = eval_transform(cfg, cls);
  const DataConfig& data = cfg.settings().data;
  const int64_t num_classes = data.num_classes;
  names_ = config_class_names(cfg, cls);
  div_ = data.normalize.div_value;
  mean_ = data.normalize.mean;
  std_ = data.normalize.std;
  for (auto* v : {&mean_, &std_}) {
    TCV_CHECK(v->size() == 1 || static_cast<int64_t>(v->size()) == channels_,
              "[Predictor] data.normalize.mean/std: ", v->size(), " values for ", channels_,
              " channels");
    v->resize(static_cast<size_t>(channels_), v->front());
  }
  model_ = create_config_model(cfg, num_classes, channels_);
  stem_ = load_model_for_prediction(cfg, checkpoint, *model_);
}

std::vector<std::vector<ClassScore>> Predictor::predict_batch(const Tensor& images,
                                                              int64_t k) const {
  TCV_CHECK(images.dim() == 4 && images.size(1) == channels_ && images.size(2) == height_ &&
                images.size(3) == width_,
            "[Predictor] expects u8 images (N, ", channels_, ", ", height_, ", ", width_, "), got ",
            images.shape_str());
  NoGradGuard no_grad;
  const int64_t n = images.size(0), plane = height_ * width_;
  const auto px = images.contiguous().to_vector<double>();
  std::vector<float> x(px.size());
  for (size_t i = 0; i < px.size(); ++i) {
    const size_t c = (i / static_cast<size_t>(plane)) % static_cast<size_t>(channels_);
    x[i] = static_cast<float>((px[i] / div_ - mean_[c]) / std_[c]);
  }
  const Tensor input = from_vector(x, {n, channels_, height_, width_});  // (N, C, H, W)
  const Tensor probs = ops::softmax(model_->forward(input), 1);          // (N, classes)
  k = std::min<int64_t>(k, probs.size(1));
  const auto [values, indices] = ops::topk(probs, k, 1);
  const auto v = values.contiguous().to_vector<double>();
  const auto idx = indices.contiguous().to_vector<int64_t>();
  std::vector<std::vector<ClassScore>> out(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < k; ++j) {
      const int64_t c = idx[static_cast<size_t>(r * k + j)];
      out[static_cast<size_t>(r)].push_back({c,
                                             c < static_cast<int64_t>(names_.size())
                                                 ? names_[static_cast<size_t>(c)]
                                                 : std::to_string(c),
                                             v[static_cast<size_t>(r * k + j)]});
    }
  return out;
}

std::vector<ClassScore> Predictor::predict(const Tensor& image, int64_t k) const {
  TCV_CHECK(image.dtype() == DType::u8 && (image.dim() == 2 || image.dim() == 3),
            "[Predictor] expects a u8 image (C, H, W) or (H, W), got ", dtype_name(image.dtype()),
            " ", image.shape_str());
  Tensor img = image.dim() == 2 ? image.unsqueeze(0) : image;
  if (img.size(0) == 3 && channels_ == 1) img = data::rgb_to_grayscale(img);
  if (img.size(0) == 1 && channels_ == 3)
    img = img.expand({3, img.size(1), img.size(2)}).contiguous();
  TCV_CHECK(img.size(0) == channels_, "[Predictor] image has ", img.size(0),
            " channels; the model takes ", channels_);
  data::Rng rng(0, 0);  // evaluation preprocessing draws nothing
  img = preprocess_(img.contiguous(), rng);
  return predict_batch(img.unsqueeze(0), k).front();
}

}  // namespace tcv::train
