// tcv-bench's logic (apps/tcv-bench/bench.h, header-only so it compiles here):
// argument parsing, a tiny training-step run and a tiny DataLoader run, and the
// JSON lines they print.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "apps/tcv-bench/bench.h"
#include "kernels/cpu/conv.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using namespace tcv;
using namespace tcv::bench;

TEST(BenchCli, ParsesTrainArguments) {
  auto o = parse_train_args({"--model",    "fmnist_cnn", "--batch=4",   "--image-size", "28",
                             "--channels", "1",          "--classes",   "10",           "--steps",
                             "2",          "--warmup",   "1",           "--device",     "cpu",
                             "--dtype",    "f32",        "--conv-algo", "direct",       "--json"});
  EXPECT_EQ(o.model, "fmnist_cnn");
  EXPECT_EQ(o.conv_algo, "direct");
  EXPECT_EQ(o.batch, 4);
  EXPECT_EQ(o.image_size, 28);
  EXPECT_EQ(o.channels, 1);
  EXPECT_EQ(o.steps, 2);
  EXPECT_EQ(o.warmup, 1);
  EXPECT_TRUE(o.json);
}

TEST(BenchCli, RejectsBadTrainArguments) {
  EXPECT_THROW(parse_train_args({}), UsageError);  // no --model
  EXPECT_THROW(parse_train_args({"--model", "m", "--batch", "0"}), UsageError);
  EXPECT_THROW(parse_train_args({"--model", "m", "--conv-algo", "wino"}), UsageError);
  EXPECT_EQ(parse_train_args({"--model", "m", "--conv-algo", "winograd"}).conv_algo, "winograd");
  EXPECT_THROW(parse_train_args({"--model", "m", "--batch", "4x"}), UsageError);
  EXPECT_THROW(parse_train_args({"--model", "m", "--frobnicate"}), UsageError);
  EXPECT_THROW(parse_train_args({"--model", "m", "--steps"}), UsageError);
  EXPECT_THROW(parse_train_args({"--model", "m", "--device", "tpu"}), UsageError);
  EXPECT_THROW(parse_train_args({"--model", "m", "--dtype", "f8"}), UsageError);
  // A GPU that is not there, and mixed precision on the CPU: a clear error, not a usage error.
  if (!cuda_is_available()) {
    try {
      parse_train_args({"--model", "m", "--device", "cuda"});
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--device cuda"), std::string::npos) << e.what();
    }
  }
  // bf16 on the CPU where it has bf16 instructions; f16 on CUDA only.
  if (kernels::cpu::bf16_supported())
    EXPECT_EQ(parse_train_args({"--model", "m", "--dtype", "bf16"}).dtype, "bf16");
  else
    EXPECT_THROW(parse_train_args({"--model", "m", "--dtype", "bf16"}), Error);
  EXPECT_THROW(parse_train_args({"--model", "m", "--dtype", "f16"}), Error);
}

TEST(BenchCli, TrainJsonHasPositiveFields) {
  auto o = parse_train_args({"--model", "fmnist_cnn", "--batch", "4", "--image-size", "28",
                             "--channels", "1", "--steps", "2", "--warmup", "1", "--json"});
  const TrainBenchResult r = run_train_bench(o);
  const Json j = json_parse(json_dump(train_result_json(o, r)));
  EXPECT_EQ(json_string(j, "model"), "fmnist_cnn");
  EXPECT_EQ(json_int(j, "batch"), 4);
  EXPECT_EQ(json_int(j, "parameters"), 421642);
  for (const char* key : {"images_per_sec", "ms_per_step", "peak_rss_bytes", "allocator_peak_bytes",
                          "allocator_reserved_bytes", "threads"}) {
    ASSERT_TRUE(j.contains(key)) << key;
    EXPECT_GT(json_double(j, key), 0.0) << key;
  }
  EXPECT_NEAR(json_double(j, "images_per_sec") * json_double(j, "ms_per_step"), 4000.0, 1e-6);
}

TEST(BenchCli, SsdStepUsesTheMultiBoxLoss) {
  // One step of SSD300 on one image with synthetic boxes (its smallest sensible input).
  auto o = parse_train_args({"--model", "ssd300", "--batch", "1", "--image-size", "300",
                             "--classes", "3", "--steps", "1", "--warmup", "0", "--json"});
  const TrainBenchResult r = run_train_bench(o);
  const Json j = json_parse(train_result_json(o, r).dump());
  EXPECT_EQ(j.at("loss").get<std::string>(), "multibox");
  EXPECT_EQ(j.at("parameters").get<int64_t>(),
            26285486 - 18 * (9 * (512 * 4 + 1024 * 6 + 512 * 6 + 256 * 6 + 256 * 4 + 256 * 4) +
                             (4 + 6 + 6 + 6 + 4 + 4)));
  EXPECT_GT(j.at("images_per_sec").get<double>(), 0.0);
  EXPECT_TRUE(std::isfinite(r.final_loss));
  EXPECT_GT(r.final_loss, 0.0);
  // The synthetic boxes lie inside the image with labels among the object classes.
  for (const auto& t : synthetic_boxes(4, 300, 3, kCPU)) {
    for (float v : t.boxes.to_vector<float>()) {
      EXPECT_GE(v, 0.0f);
      EXPECT_LE(v, 300.0f);
    }
    for (int64_t l : t.labels.to_vector<int64_t>()) EXPECT_TRUE(l == 1 || l == 2) << l;
  }
}

TEST(BenchCli, OpenPoseStepUsesTheStagedMaskedL2Loss) {
  // One step of the small OpenPose on one 64x64 image: 8x8 targets at stride 8.
  auto o = parse_train_args({"--model", "openpose_lite", "--batch", "1", "--image-size", "64",
                             "--steps", "1", "--warmup", "0", "--json"});
  const TrainBenchResult r = run_train_bench(o);
  const Json j = json_parse(json_dump(train_result_json(o, r)));
  EXPECT_EQ(json_string(j, "loss"), "openpose_masked_l2");
  EXPECT_EQ(json_int(j, "parameters"), 1901179);
  // It predicts heatmaps and PAFs, not classes.
  EXPECT_EQ(r.outputs, "19 heatmaps + 38 PAFs");
  EXPECT_EQ(json_int(j, "heatmaps"), 19);
  EXPECT_EQ(json_int(j, "pafs"), 38);
  EXPECT_FALSE(j.contains("classes"));
  EXPECT_GT(json_double(j, "images_per_sec"), 0.0);
  EXPECT_GT(json_int(j, "peak_rss_bytes"), 0);
  // Three stages of 38 + 19 channels over 8x8 pixels, 95% unmasked, of targets
  // whose squares average 1/3: a loss of about 3 * 57 * 64 * 0.95 / 3 = 3466
  // while the outputs are near 0 (the stages start at std 0.01).
  EXPECT_TRUE(std::isfinite(r.final_loss));
  EXPECT_GT(r.final_loss, 1500.0);
  EXPECT_LT(r.final_loss, 6000.0);
  // An input smaller than the stride leaves no output pixel: a clear error.
  EXPECT_THROW(run_train_bench(parse_train_args({"--model", "openpose_lite", "--batch", "1",
                                                 "--image-size", "4", "--steps", "1"})),
               Error);
}

TEST(BenchCli, ProfileListsTheKernelsOfAStep) {
  auto o =
      parse_train_args({"--model", "fmnist_cnn", "--batch", "4", "--image-size", "28", "--channels",
                        "1", "--steps", "1", "--warmup", "0", "--profile", "--json"});
  EXPECT_EQ(o.profile_steps, 3);
  const TrainBenchResult r = run_train_bench(o);
  const Json j = json_parse(json_dump(train_result_json(o, r)));
  EXPECT_EQ(json_int(j, "profile_steps"), 3);
  // fmnist_cnn has two convolutions: two forward and two backward calls a step.
  double conv_fwd_calls = 0, total_ms = 0;
  for (const Json& row : j.at("profile")) {
    if (json_string(row, "kernel") == "conv2d_forward")
      conv_fwd_calls = json_double(row, "calls_per_step");
    EXPECT_EQ(json_string(row, "device"), "cpu");
    total_ms += json_double(row, "ms_per_step");
  }
  EXPECT_EQ(conv_fwd_calls, 2.0);
  EXPECT_GT(total_ms, 0.0);
  EXPECT_FALSE(profiler::enabled());  // switched off again
  EXPECT_EQ(parse_train_args({"--model", "m", "--profile-steps", "7"}).profile_steps, 7);
}

TEST(BenchCli, ParsesDataArguments) {
  auto o = parse_data_args({"--images", "10", "--size=64", "--workers", "0,2", "--json"});
  EXPECT_EQ(o.images, 10);
  EXPECT_EQ(o.size, 64);
  EXPECT_EQ(o.workers, (std::vector<int>{0, 2}));
  EXPECT_TRUE(o.json);
  EXPECT_THROW(parse_data_args({"--workers", "0,,1"}), UsageError);
  EXPECT_THROW(parse_data_args({"--workers", "-1"}), UsageError);
}

TEST(BenchCli, DataJsonHasOneRunPerWorkerCount) {
  const tcv::testing::TempDir tmp("bench_data");
  const fs::path dir = tmp.root() / "data";
  auto o = parse_data_args({"--images", "12", "--size", "48", "--crop", "32", "--batch", "4",
                            "--workers", "0,2", "--dir", dir.string(), "--json"});
  const Json j = json_parse(json_dump(data_result_json(o, run_data_bench(o))));
  const auto& runs = j.at("runs");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(json_int(runs[0], "workers"), 0);
  EXPECT_EQ(json_int(runs[1], "workers"), 2);
  for (const auto& r : runs) {
    EXPECT_EQ(json_int(r, "images"), 12);
    EXPECT_GT(json_double(r, "images_per_sec"), 0.0);
  }
  EXPECT_GT(json_int(j, "peak_rss_bytes"), 0);
  // --dir keeps the files, in ImageFolder's layout.
  EXPECT_TRUE(fs::exists(dir / "class0" / "img0.jpg"));
  EXPECT_TRUE(fs::exists(dir / "class1" / "img11.jpg"));
}
