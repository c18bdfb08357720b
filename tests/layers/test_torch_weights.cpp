// Weights converted from PyTorch by scripts/convert_torchvision.py load into
// tcv's layers by name and give PyTorch's outputs.
//
// tests/data/torch_conv_bn.safetensors holds the state dict of
// nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4)) after one
// training-mode forward (torch.manual_seed(0)); the expected values below were
// printed by PyTorch 1.13 for the same weights.
#include <gtest/gtest.h>

#include <cstdlib>

#include "engine/serialize.h"
#include "layers/layers.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

std::string data_file(const std::string& name) {
  return testing::source_dir() + "/tests/data/" + name;
}

TEST(TorchWeights, ConvertedStateDictLoadsAndMatchesPyTorch) {
  auto file = load_safetensors(data_file("torch_conv_bn.safetensors"));
  auto model = std::make_shared<nn::Sequential>(std::initializer_list<nn::ModulePtr>{
      std::make_shared<nn::Conv2d>(1, 4, 3, nn::Conv2dOptions{.padding = 1}),
      std::make_shared<nn::BatchNorm2d>(4)});
  model->load_state_dict(file.tensors);  // strict: every key must match
  EXPECT_EQ(model->state_dict()[6].first, "1.num_batches_tracked");
  EXPECT_EQ(model->state_dict()[6].second.item(), 1.0);
  testing::expect_close(model->state_dict()[4].second,
                        testing::lit({-0.021505868062376976, 0.021871086210012436,
                                      0.022872721776366234, -0.010578309185802937},
                                     {4}, DType::f32),
                        1e-7, 1e-6, "running_mean");
  model->eval();
  Tensor x =
      ops::mul(arange(0.0, 25.0, 1.0, {.dtype = DType::f32}).reshape({1, 1, 5, 5}), 1.0 / 25);
  Tensor y = (*model)(x);
  Tensor center = y.select(3, 2).select(2, 2).select(0, 0);  // y[0, :, 2, 2]
  testing::expect_close(center,
                        testing::lit({-0.18811574578285217, 0.16704681515693665, 0.5159302949905396,
                                      -0.5170974135398865},
                                     {4}, DType::f32),
                        1e-6, 1e-5, "output");
}

}  // namespace
}  // namespace tcv
