// Fine-tuning from pretrained weights: everything but a re-shaped head loads.
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>

#include "engine/serialize.h"
#include "models/registry.h"
#include "support/gradcheck.h"
#include "train/checkpoint.h"

namespace tcv::train {
namespace {

namespace fs = std::filesystem;

struct PretrainedTest : ::testing::Test {
  void SetUp() override {
    models::register_builtin_models();
    dir = fs::temp_directory_path() / ("tcv_pretrained_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    source = models::create_model("fmnist_cnn", {.num_classes = 10, .in_channels = 1});
    save_safetensors((dir / "weights.safetensors").string(), source->state_dict());
  }
  void TearDown() override { fs::remove_all(dir); }
  fs::path dir;
  std::shared_ptr<nn::Module> source;
};

TEST_F(PretrainedTest, NewHeadKeepsItsInitEverythingElseLoads) {
  manual_seed(99);  // a different init than the source
  auto target = models::create_model("fmnist_cnn", {.num_classes = 7, .in_channels = 1});
  const Tensor head_before = target->state_dict().back().second.clone();
  const PretrainedLoad r = load_pretrained((dir / "weights.safetensors").string(), *target);
  EXPECT_EQ(r.kept, (std::vector<std::string>{"9.weight", "9.bias"}));
  EXPECT_EQ(r.loaded, static_cast<int64_t>(source->state_dict().size()) - 2);
  const nn::StateDict s = source->state_dict(), t = target->state_dict();
  for (size_t i = 0; i + 2 < s.size(); ++i)
    testing::expect_close(t[i].second, s[i].second, 0, 0, s[i].first);
  testing::expect_close(t.back().second, head_before, 0, 0, "head bias");
}

TEST_F(PretrainedTest, TcvCheckpointsLoadToo) {
  nn::StateDict prefixed;
  for (const auto& [k, v] : source->state_dict()) prefixed.emplace_back("model." + k, v);
  prefixed.emplace_back("optim.step", scalar_tensor(3, {.dtype = DType::i64}));
  save_safetensors((dir / "ckpt.safetensors").string(), prefixed);
  auto target = models::create_model("fmnist_cnn", {.num_classes = 10, .in_channels = 1});
  const PretrainedLoad r = load_pretrained((dir / "ckpt.safetensors").string(), *target);
  EXPECT_TRUE(r.kept.empty());
  EXPECT_EQ(r.loaded, static_cast<int64_t>(source->state_dict().size()));
}

TEST_F(PretrainedTest, BackboneMismatchIsAnErrorNamingTheKey) {
  auto rgb = models::create_model("fmnist_cnn", {.num_classes = 10, .in_channels = 3});
  const std::string msg =
      testing::error_of([&] { load_pretrained((dir / "weights.safetensors").string(), *rgb); });
  EXPECT_NE(msg.find("shape mismatch 0.weight (32, 1, 3, 3) vs model (32, 3, 3, 3)"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("weights.safetensors"), std::string::npos) << msg;
  auto other = models::create_model("fmnist_resnet", {.num_classes = 10, .in_channels = 1});
  const std::string msg2 =
      testing::error_of([&] { load_pretrained((dir / "weights.safetensors").string(), *other); });
  EXPECT_NE(msg2.find("missing"), std::string::npos) << msg2;
  EXPECT_NE(msg2.find("unexpected"), std::string::npos) << msg2;
}

// Weights with inf or NaN would train and predict without a word: refused,
// naming the tensor, in both layouts.
TEST_F(PretrainedTest, InfOrNaNIsRefusedNamingTheTensor) {
  nn::StateDict bad, prefixed;
  for (const auto& [k, v] : source->state_dict()) {
    Tensor t = v.clone();
    if (k == "3.weight") t.data<float>()[42] = std::numeric_limits<float>::infinity();
    if (k == "7.bias") t.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
    bad.emplace_back(k, t);
    prefixed.emplace_back("model." + k, t);
  }
  save_safetensors((dir / "bad.safetensors").string(), bad);
  save_safetensors((dir / "bad_ckpt.safetensors").string(), prefixed);
  auto target = models::create_model("fmnist_cnn", {.num_classes = 10, .in_channels = 1});
  const std::string msg =
      testing::error_of([&] { load_pretrained((dir / "bad.safetensors").string(), *target); });
  EXPECT_NE(msg.find("bad.safetensors: tensor \"3.weight\" holds inf or NaN"), std::string::npos)
      << msg;
  const std::string msg2 =
      testing::error_of([&] { load_pretrained((dir / "bad_ckpt.safetensors").string(), *target); });
  EXPECT_NE(msg2.find("tensor \"model.3.weight\" holds inf or NaN"), std::string::npos) << msg2;
}

}  // namespace
}  // namespace tcv::train
