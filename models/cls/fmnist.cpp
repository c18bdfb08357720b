#include "models/cls/fmnist.h"

#include "models/registry.h"

namespace tcv::models::cls {

FmnistCnn::FmnistCnn(int64_t num_classes, int64_t in_channels) {
  conv1 = std::make_shared<nn::Conv2d>(in_channels, 32, 3, nn::Conv2dOptions{.padding = 1});
  conv2 = std::make_shared<nn::Conv2d>(32, 64, 3, nn::Conv2dOptions{.padding = 1});
  fc1 = std::make_shared<nn::Linear>(64 * 7 * 7, 128);
  fc2 = std::make_shared<nn::Linear>(128, num_classes);
  push_back(conv1);                               // 0: (N, 32, 28, 28)
  push_back(std::make_shared<nn::ReLU>());        // 1
  push_back(std::make_shared<nn::MaxPool2d>(2));  // 2: (N, 32, 14, 14)
  push_back(conv2);                               // 3: (N, 64, 14, 14)
  push_back(std::make_shared<nn::ReLU>());        // 4
  push_back(std::make_shared<nn::MaxPool2d>(2));  // 5: (N, 64, 7, 7)
  push_back(std::make_shared<nn::Flatten>());     // 6: (N, 3136)
  push_back(fc1);                                 // 7: (N, 128)
  push_back(std::make_shared<nn::ReLU>());        // 8
  push_back(fc2);                                 // 9: (N, num_classes)
}

Tensor FmnistCnn::forward(const Tensor& x) {
  TCV_CHECK(x.dim() == 4 && x.size(1) == conv1->in_channels && x.size(2) == 28 && x.size(3) == 28,
            "[FmnistCnn] expects input (N, ", conv1->in_channels, ", 28, 28), got ", x.shape_str());
  return nn::Sequential::forward(x);
}

FmnistResNet::FmnistResNet(int64_t num_classes, int64_t in_channels) {
  conv1 = register_module(
      "conv1", std::make_shared<nn::Conv2d>(in_channels, 32, 3,
                                            nn::Conv2dOptions{.padding = 1, .bias = false}));
  bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(32));
  relu = register_module("relu", std::make_shared<nn::ReLU>());
  int64_t inplanes = 32;
  layer1 = register_module("layer1", make_basic_layer(inplanes, 32, 2));
  layer2 = register_module("layer2", make_basic_layer(inplanes, 64, 2, 2));
  layer3 = register_module("layer3", make_basic_layer(inplanes, 128, 2, 2));
  avgpool = register_module("avgpool", std::make_shared<nn::AdaptiveAvgPool2d>(1));
  fc = register_module("fc",
                       std::make_shared<nn::Linear>(128 * BasicBlock::kExpansion, num_classes));
  init_resnet_weights(*this);
}

Tensor FmnistResNet::forward(const Tensor& x) {
  Tensor h = bn1->forward_relu(conv1->forward(x));           // (N, 32, H, W)
  h = layer3->forward(layer2->forward(layer1->forward(h)));  // (N, 128, H/4, W/4)
  h = avgpool->forward(h).flatten(1);                        // (N, 128)
  return fc->forward(h);
}

void register_fmnist_models() {
  register_model({.name = "fmnist_cnn",
                  .description = "2-conv CNN for 28x28 images (conv32-pool-conv64-pool-fc128-fc)",
                  .reference = {.num_classes = 10, .in_channels = 1}},
                 [](const ModelOptions& o) {
                   return std::make_shared<FmnistCnn>(o.num_classes, o.in_channels);
                 });
  register_model(
      {.name = "fmnist_resnet",
       .description = "small CIFAR-style ResNet for 28x28 images: 3x3 stem, BasicBlocks x2 at "
                      "32/64/128 channels, global average pool, fc",
       .reference = {.num_classes = 10, .in_channels = 1}},
      [](const ModelOptions& o) {
        return std::make_shared<FmnistResNet>(o.num_classes, o.in_channels);
      });
}

}  // namespace tcv::models::cls
