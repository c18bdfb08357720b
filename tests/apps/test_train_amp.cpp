// tcv-train's CPU numerics keys (issue 28): train.conv_algo picks the
// convolution algorithm for the run and gives the previous choice back;
// train.amp = "bf16" trains on CPUs with bf16 instructions with f32 master
// weights, and is refused, naming the key and what the CPU lacks, where they
// are missing (here: hidden with ONEDNN_MAX_CPU_ISA); f16 is CUDA-only.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "apps/process.h"
#include "engine/json.h"
#include "engine/ops.h"
#include "engine/serialize.h"
#include "kernels/cpu/conv.h"
#include "support/conv_geom.h"
#include "support/gradcheck.h"
#include "support/run_files.h"
#include "support/tasks.h"
#include "support/temp_dir.h"
#include "train/config.h"
#include "train/trainer.h"

namespace fs = std::filesystem;
using namespace tcv;
using namespace tcv::train;

namespace {

struct TrainAmp : ::testing::Test {
  tcv::testing::TempDir tmp{"train_amp"};
  fs::path data = tmp.root() / "data";
  void SetUp() override { tcv::testing::write_small_fmnist(data, 256, 100); }

  Config config(const std::vector<std::string>& sets) const {
    Config c = Config::from_file(tcv::testing::source_dir() + "/configs/cls/fmnist_cnn.toml");
    for (const std::string& s :
         {"data.data_dir=\"" + data.string() + "\"", std::string("device=\"cpu\""),
          std::string("data.workers=0"), std::string("train.batch_size=32"),
          std::string("val.max_images=100"), std::string("solver.display_iter=1"),
          std::string("solver.lr.is_warm=false"), std::string("solver.lr.lr_policy=\"fixed\"")})
      c.set_override(s);
    for (const std::string& s : sets) c.set_override(s);
    return c;
  }

  TrainSummary train(const Config& c, const fs::path& out) const {
    Trainer t(c, {.out_dir = out.string(), .progress = ProgressMode::quiet, .log = nullptr});
    return t.run();
  }
};

std::vector<double> losses(const fs::path& metrics) {
  std::vector<double> out;
  std::ifstream f(metrics);
  for (std::string line; std::getline(f, line);) {
    const Json j = json_parse(line);
    if (json_string(j, "split") == "train") out.push_back(json_double(j, "loss"));
  }
  return out;
}

bool same_bytes(const fs::path& a, const fs::path& b) {
  const auto wa = load_safetensors(a.string()).tensors, wb = load_safetensors(b.string()).tensors;
  if (wa.size() != wb.size()) return false;
  for (size_t i = 0; i < wa.size(); ++i)
    if (wa[i].second.nbytes() != wb[i].second.nbytes() ||
        std::memcmp(wa[i].second.data_ptr(), wb[i].second.data_ptr(), wa[i].second.nbytes()) != 0)
      return false;
  return true;
}

}  // namespace

// The key reaches the kernels: auto and direct train bit for bit alike (both
// run oneDNN's direct kernels), Winograd rounds differently; and the process's
// choice is back when the trainer is gone.
TEST_F(TrainAmp, ConvAlgoKeyChoosesTheAlgorithmForTheRun) {
  const ops::ConvAlgo before = ops::get_conv_algo();
  for (const char* algo : {"auto", "direct", "winograd"})
    train(config({"solver.max_iters=4", std::string("train.conv_algo=\"") + algo + "\""}),
          tmp.root() / algo);
  EXPECT_EQ(ops::get_conv_algo(), before);
  const auto ck = [&](const char* algo) {
    return tmp.root() / algo / "checkpoints" / "latest.safetensors";
  };
  // fmnist_cnn's conv2: 32 -> 64 channels at 14x14, batch 32. The three runs
  // differ exactly where the layer's algorithms do: auto runs tcv's F(2x2, 3x3)
  // forward and backward-data, winograd oneDNN's F(4x4, 3x3) where it has one
  // (AVX-512) and else the same as auto.
  const kernels::Conv2dGeom g = tcv::testing::conv3x3_geom(32, 32, 64, 14, 14);
  const auto impl = [&](ops::ConvAlgo a) {
    ops::set_conv_algo(a);
    return kernels::cpu::conv2d_impl_names(g);
  };
  const std::string auto_impl = impl(ops::ConvAlgo::automatic),
                    direct_impl = impl(ops::ConvAlgo::direct),
                    wino_impl = impl(ops::ConvAlgo::winograd);
  ops::set_conv_algo(before);
  EXPECT_EQ(direct_impl.find("wino"), std::string::npos) << direct_impl;
  EXPECT_EQ(same_bytes(ck("auto"), ck("direct")), auto_impl == direct_impl) << auto_impl;
  EXPECT_EQ(same_bytes(ck("auto"), ck("winograd")), auto_impl == wino_impl) << wino_impl;
}

TEST_F(TrainAmp, Bf16TrainsOnTheCpuWithF32MasterWeights) {
  if (!kernels::cpu::bf16_supported())
    GTEST_SKIP() << "this CPU has no bf16 instructions (AVX512_BF16 or AMX-BF16)";
  const fs::path out = tmp.root() / "bf16";
  const TrainSummary s = train(config({"solver.max_iters=24", "train.amp=\"bf16\""}), out);
  EXPECT_EQ(s.iters, 24);
  const std::vector<double> l = losses(out / "metrics.jsonl");
  ASSERT_EQ(l.size(), 24u);
  for (double v : l) EXPECT_TRUE(std::isfinite(v));
  // From chance (ln 10 = 2.30) down, as the f32 run goes.
  double first = 0, last = 0;
  for (int i = 0; i < 4; ++i)
    first += l[static_cast<size_t>(i)] / 4, last += l[l.size() - 1 - i] / 4;
  EXPECT_LT(last, first - 0.3) << "first " << first << ", last " << last;
  for (const auto& [name, t] :
       load_safetensors((out / "checkpoints/latest.safetensors").string()).tensors)
    if (is_floating(t.dtype())) {
      EXPECT_EQ(t.dtype(), DType::f32) << name;
    }
}

TEST_F(TrainAmp, F16IsRefusedOnTheCpuNamingTheKey) {
  const std::string msg = tcv::testing::error_of([&] {
    train(config({"solver.max_iters=1", "train.amp=\"f16\""}), tmp.root() / "f16");
  });
  EXPECT_NE(msg.find("train.amp"), std::string::npos) << msg;
  EXPECT_NE(msg.find("f16 mixed precision runs on CUDA only"), std::string::npos) << msg;
}

// A CPU without bf16 instructions, as oneDNN sees it with ONEDNN_MAX_CPU_ISA
// capped below them: tcv-train stops before the first step with a message
// naming the key and the instructions.
TEST_F(TrainAmp, Bf16IsRefusedWhereTheCpuLacksBf16Instructions) {
#ifndef TCV_TRAIN
  GTEST_SKIP() << "tcv-train is not built";
#else
  std::vector<std::string> argv = {"/usr/bin/env",
                                   "ONEDNN_MAX_CPU_ISA=AVX512_CORE",
                                   TCV_TRAIN,
                                   "--config",
                                   tcv::testing::source_dir() + "/configs/cls/fmnist_cnn.toml",
                                   "--out",
                                   (tmp.root() / "refused").string(),
                                   "--amp",
                                   "bf16"};
  for (const std::string& s :
       {"data.data_dir=\"" + data.string() + "\"", std::string("device=\"cpu\""),
        std::string("solver.max_iters=1"), std::string("data.workers=0")}) {
    argv.push_back("--set");
    argv.push_back(s);
  }
  const auto r = tcv::testing::run_process(argv, (tmp.root() / "refused.log").string());
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("train.amp"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("needs AVX512_BF16 or AMX-BF16 instructions"), std::string::npos)
      << r.output;
#endif
}
