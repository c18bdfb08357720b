#include "models/cls/resnet_blocks.h"

#include "engine/ops/elementwise.h"
#include "layers/init.h"

namespace tcv::models::cls {

BasicBlock::BasicBlock(int64_t inplanes, int64_t planes, int64_t stride, nn::ModulePtr ds) {
  conv1 = register_module(
      "conv1",
      std::make_shared<nn::Conv2d>(
          inplanes, planes, 3, nn::Conv2dOptions{.stride = stride, .padding = 1, .bias = false}));
  bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(planes));
  conv2 = register_module(
      "conv2", std::make_shared<nn::Conv2d>(planes, planes, 3,
                                            nn::Conv2dOptions{.padding = 1, .bias = false}));
  bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(planes));
  if (ds) downsample = register_module("downsample", std::move(ds));
}

Tensor BasicBlock::forward(const Tensor& x) {
  Tensor out = ops::relu(bn1->forward(conv1->forward(x)));
  out = bn2->forward(conv2->forward(out));
  const Tensor identity = downsample ? downsample->forward(x) : x;
  return ops::relu(out + identity);
}

std::shared_ptr<nn::Sequential> make_basic_layer(int64_t& inplanes, int64_t planes, int64_t blocks,
                                                 int64_t stride) {
  TCV_CHECK(blocks > 0, "[make_basic_layer] needs at least one block, got ", blocks);
  nn::ModulePtr ds;
  if (stride != 1 || inplanes != planes * BasicBlock::kExpansion) {
    ds = std::make_shared<nn::Sequential>(std::initializer_list<nn::ModulePtr>{
        std::make_shared<nn::Conv2d>(inplanes, planes * BasicBlock::kExpansion, 1,
                                     nn::Conv2dOptions{.stride = stride, .bias = false}),
        std::make_shared<nn::BatchNorm2d>(planes * BasicBlock::kExpansion)});
  }
  auto layer = std::make_shared<nn::Sequential>();
  layer->push_back(std::make_shared<BasicBlock>(inplanes, planes, stride, ds));
  inplanes = planes * BasicBlock::kExpansion;
  for (int64_t i = 1; i < blocks; ++i)
    layer->push_back(std::make_shared<BasicBlock>(inplanes, planes));
  return layer;
}

void init_resnet_weights(nn::Module& model, bool zero_init_residual) {
  for (auto& [name, m] : model.named_modules()) {
    if (auto* conv = dynamic_cast<nn::Conv2d*>(m)) {
      nn::init::kaiming_normal_(conv->weight, 0.0, nn::init::FanMode::fan_out,
                                nn::init::Nonlinearity::relu);
    } else if (auto* bn = dynamic_cast<nn::BatchNorm2d*>(m)) {
      if (bn->weight.defined()) nn::init::ones_(bn->weight);
      if (bn->bias.defined()) nn::init::zeros_(bn->bias);
    }
  }
  if (!zero_init_residual) return;
  for (auto& [name, m] : model.named_modules())
    if (auto* block = dynamic_cast<BasicBlock*>(m)) nn::init::zeros_(block->bn2->weight);
}

}  // namespace tcv::models::cls
