#include "models/cls/resnet_blocks.h"

#include "engine/ops/elementwise.h"
#include "layers/init.h"

namespace tcv::models::cls {

namespace {

std::shared_ptr<nn::Conv2d> conv3x3(int64_t in, int64_t out, int64_t stride = 1, int64_t groups = 1,
                                    int64_t dilation = 1) {
  return std::make_shared<nn::Conv2d>(in, out, 3,
                                      nn::Conv2dOptions{.stride = stride,
                                                        .padding = dilation,
                                                        .dilation = dilation,
                                                        .groups = groups,
                                                        .bias = false});
}

std::shared_ptr<nn::Conv2d> conv1x1(int64_t in, int64_t out, int64_t stride = 1) {
  return std::make_shared<nn::Conv2d>(in, out, 1,
                                      nn::Conv2dOptions{.stride = stride, .bias = false});
}

}  // namespace

BasicBlock::BasicBlock(int64_t inplanes, int64_t planes, int64_t stride, nn::ModulePtr ds,
                       int64_t dilation) {
  conv1 = register_module("conv1", conv3x3(inplanes, planes, stride, 1, dilation));
  bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(planes));
  conv2 = register_module("conv2", conv3x3(planes, planes, 1, 1, dilation));
  bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(planes));
  if (ds) downsample = register_module("downsample", std::move(ds));
}

Tensor BasicBlock::forward(const Tensor& x) {
  Tensor out = bn1->forward_relu(conv1->forward(x));
  out = bn2->forward(conv2->forward(out));
  const Tensor identity = downsample ? downsample->forward(x) : x;
  return ops::add_relu(out, identity);
}

Bottleneck::Bottleneck(int64_t inplanes, int64_t planes, int64_t stride, nn::ModulePtr ds,
                       int64_t groups, int64_t base_width, int64_t dilation) {
  const int64_t width = planes * base_width / 64 * groups;
  conv1 = register_module("conv1", conv1x1(inplanes, width));
  bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(width));
  conv2 = register_module("conv2", conv3x3(width, width, stride, groups, dilation));
  bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(width));
  conv3 = register_module("conv3", conv1x1(width, planes * kExpansion));
  bn3 = register_module("bn3", std::make_shared<nn::BatchNorm2d>(planes * kExpansion));
  if (ds) downsample = register_module("downsample", std::move(ds));
}

Tensor Bottleneck::forward(const Tensor& x) {
  Tensor out = bn1->forward_relu(conv1->forward(x));
  out = bn2->forward_relu(conv2->forward(out));
  out = bn3->forward(conv3->forward(out));
  const Tensor identity = downsample ? downsample->forward(x) : x;
  return ops::add_relu(out, identity);
}

int64_t block_expansion(BlockKind kind) {
  return kind == BlockKind::basic ? BasicBlock::kExpansion : Bottleneck::kExpansion;
}

std::shared_ptr<nn::Sequential> make_resnet_layer(BlockKind kind, LayerState& s, int64_t planes,
                                                  int64_t blocks, int64_t stride, bool dilate) {
  TCV_CHECK(blocks > 0, "[make_resnet_layer] needs at least one block, got ", blocks);
  TCV_CHECK(stride > 0, "[make_resnet_layer] stride must be positive, got ", stride);
  const int64_t expansion = block_expansion(kind);
  const int64_t previous_dilation = s.dilation;
  if (dilate) {
    s.dilation *= stride;
    stride = 1;
  }
  nn::ModulePtr ds;
  if (stride != 1 || s.inplanes != planes * expansion) {
    ds = std::make_shared<nn::Sequential>(std::initializer_list<nn::ModulePtr>{
        conv1x1(s.inplanes, planes * expansion, stride),
        std::make_shared<nn::BatchNorm2d>(planes * expansion)});
  }
  auto block = [&](int64_t inplanes, int64_t block_stride, nn::ModulePtr downsample,
                   int64_t dilation) -> nn::ModulePtr {
    if (kind == BlockKind::basic) {
      TCV_CHECK(s.groups == 1 && s.base_width == 64,
                "[make_resnet_layer] BasicBlock only supports groups=1 and base_width=64, got ",
                s.groups, " and ", s.base_width);
      return std::make_shared<BasicBlock>(inplanes, planes, block_stride, std::move(downsample),
                                          dilation);
    }
    return std::make_shared<Bottleneck>(inplanes, planes, block_stride, std::move(downsample),
                                        s.groups, s.base_width, dilation);
  };
  auto layer = std::make_shared<nn::Sequential>();
  layer->push_back(block(s.inplanes, stride, ds, previous_dilation));
  s.inplanes = planes * expansion;
  for (int64_t i = 1; i < blocks; ++i) layer->push_back(block(s.inplanes, 1, nullptr, s.dilation));
  return layer;
}

std::shared_ptr<nn::Sequential> make_basic_layer(int64_t& inplanes, int64_t planes, int64_t blocks,
                                                 int64_t stride) {
  TCV_CHECK(blocks > 0, "[make_basic_layer] needs at least one block, got ", blocks);
  LayerState s{.inplanes = inplanes};
  auto layer = make_resnet_layer(BlockKind::basic, s, planes, blocks, stride);
  inplanes = s.inplanes;
  return layer;
}

void init_resnet_weights(nn::Module& model, bool zero_init_residual) {
  nn::init::init_cnn_weights(model);  // fc keeps nn::Linear's default, as torchvision
  if (!zero_init_residual) return;
  for (auto& [name, m] : model.named_modules()) {
    if (auto* block = dynamic_cast<BasicBlock*>(m)) nn::init::zeros_(block->bn2->weight);
    if (auto* block = dynamic_cast<Bottleneck*>(m)) nn::init::zeros_(block->bn3->weight);
  }
}

}  // namespace tcv::models::cls
