// tcv-predict on a folder holding one corrupt image: the others are predicted,
// the bad one is reported, and the exit status says which (1, or 0 when
// data.skip_corrupt = true).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "apps/process.h"
#include "data/image.h"
#include "engine/json.h"
#include "engine/ops.h"
#include "models/registry.h"
#include "support/gradcheck.h"
#include "support/run_files.h"
#include "support/tasks.h"
#include "support/temp_dir.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/trainer.h"

namespace fs = std::filesystem;
using namespace tcv;
using namespace tcv::train;

namespace {

using tcv::testing::contains;

}  // namespace

TEST(PredictCli, ACorruptImagePredictsTheOthersAndReportsIt) {
#ifndef TCV_PREDICT
  GTEST_SKIP() << "tcv-predict is not built";
#else
  tcv::testing::TempDir tmp("predict");
  // A checkpoint of a fresh fmnist_cnn and its config.
  models::register_builtin_models();
  auto model = models::create_model("fmnist_cnn", {.num_classes = 10, .in_channels = 1});
  TrainerState st;
  st.model_name = "fmnist_cnn";
  const std::string stem = tmp.path("model");
  save_checkpoint(stem, *model, nullptr, st);
  const std::string config = tmp.path("config.toml");
  std::ofstream(config) << Config().to_toml();
  // Three images, the middle one corrupt.
  const fs::path images = tmp.root() / "images";
  fs::create_directories(images);
  const Tensor img = ops::mul(ones({1, 28, 28}), 200.0).to(DType::u8);
  data::write_image((images / "a.png").string(), img);
  std::ofstream(images / "b.png", std::ios::binary) << "\x89PNG\r\n\x1a\n and then nothing";
  data::write_image((images / "c.png").string(), img);

  for (const bool skip : {false, true}) {
    SCOPED_TRACE(skip ? "skip_corrupt" : "default");
    std::vector<std::string> argv = {
        TCV_PREDICT, "--checkpoint", stem + ".safetensors", "--config", config, "--json", "--top",
        "2",         images.string()};
    if (skip) argv.insert(argv.end(), {"--set", "data.skip_corrupt=true"});
    const auto r = tcv::testing::run_process(argv, tmp.path("out.log"));
    EXPECT_EQ(r.status, skip ? 0 : 1) << r.output;
    // stderr names the bad file; the JSON document on stdout lists both good ones.
    EXPECT_TRUE(contains(r.output, "b.png: cannot decode image")) << r.output;
    EXPECT_TRUE(contains(r.output, skip ? "skipped (data.skip_corrupt)" : "error:")) << r.output;
    EXPECT_TRUE(contains(r.output, "1 of 3 images could not be read")) << r.output;
    const size_t open = r.output.find("{\n"), close = r.output.rfind("\n}");
    ASSERT_NE(open, std::string::npos) << r.output;
    const Json j = json_parse(r.output.substr(open, close + 2 - open));
    ASSERT_EQ(j.at("predictions").size(), 2u);
    EXPECT_TRUE(contains(json_string(j.at("predictions")[0], "input"), "a.png"));
    EXPECT_TRUE(contains(json_string(j.at("predictions")[1], "input"), "c.png"));
    EXPECT_EQ(j.at("predictions")[1].at("top").size(), 2u);
    ASSERT_EQ(j.at("unreadable").size(), 1u);
    EXPECT_TRUE(contains(json_string(j.at("unreadable")[0], "input"), "b.png"));
  }
  // Nothing readable: an error even when skipping.
  fs::remove(images / "a.png");
  fs::remove(images / "c.png");
  const auto none =
      tcv::testing::run_process({TCV_PREDICT, "--checkpoint", stem, "--config", config,
                                 images.string(), "--set", "data.skip_corrupt=true"},
                                tmp.path("none.log"));
  EXPECT_EQ(none.status, 1) << none.output;
#endif
}
