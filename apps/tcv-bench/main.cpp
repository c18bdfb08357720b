// tcv-bench: throughput of whole training steps and of the image data pipeline.
//
//   tcv-bench train --model NAME [--batch B] [--image-size S] [--channels C] [--classes K]
//                   [--steps N] [--warmup W] [--device cpu|cuda] [--dtype f32|bf16|f16]
//                   [--conv-algo auto|direct|winograd] [--profile] [--json]
//   tcv-bench data [--images N] [--size S] [--crop S] [--batch B] [--workers 0,1,2]
//                  [--epochs E] [--dir DIR] [--json]
//   tcv-bench allreduce [options]      (under tcv-run; see allreduce --help)
//   tcv-bench ddp --project FILE [options]   scaling projection of a DDP step timeline
//
// Exit status: 0 on success, 2 for a bad command line, 1 otherwise.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "apps/cli.h"
#include "apps/tcv-bench/allreduce.h"
#include "apps/tcv-bench/bench.h"
#include "apps/tcv-bench/ddp.h"

namespace {

constexpr const char* kUsage =
    "usage: tcv-bench train --model NAME [options]   times whole training steps\n"
    "       tcv-bench data [options]                 DataLoader decode+augment throughput\n"
    "       tcv-bench allreduce [options]            all-reduce bandwidth (see allreduce --help)\n"
    "       tcv-bench ddp --project FILE [options]   scaling projection of a DDP step (ddp "
    "--help)\n"
    "\n"
    "train: forward, loss, backward and SGD (momentum 0.9) on one synthetic batch (cross-entropy;\n"
    "  for ssd300/ssd512 the MultiBox loss on 1 to 4 random boxes per image; segmentation models\n"
    "  (deeplabv3_*, fcn_*, pspnet_*) train on S x S masks (5% of pixels 255, ignored) with\n"
    "  cross-entropy on the main output + 0.4 x that on the auxiliary one; openpose and\n"
    "  openpose_lite with their staged masked L2 loss on random heatmaps, PAFs and mask at S/8),\n"
    "after warm-up; prints images/s, ms/step (median) and peak memory.\n"
    "  --model NAME       a registered model (tcv-train --list-models)\n"
    "  --batch B          batch size (64)\n"
    "  --image-size S     input S x S (32)\n"
    "  --channels C       input channels (3)\n"
    "  --classes K        classes (10; OpenPose models predict their heatmaps and PAFs)\n"
    "  --steps N          timed steps (20)\n"
    "  --warmup W         untimed steps first (5)\n"
    "  --device D         cpu | cuda | cuda:N (cpu)\n"
    "  --dtype T          f32 | bf16 | f16: mixed precision, f16 with loss scaling (f32);\n"
    "                     bf16 on CUDA or a CPU with bf16 instructions, f16 on CUDA\n"
    "  --conv-algo A      CPU f32 convolutions: auto (tcv's Winograd F(2x2, 3x3) on the 3x3\n"
    "                     stride-1 layers it fits, dilated too, and its split of 3x3\n"
    "                     stride-2 layers, each pass within its own error bound; direct\n"
    "                     elsewhere) | direct (as PyTorch) | winograd\n"
    "                     (oneDNN's F(4x4, 3x3) on 3x3 stride-1 layers of whole 16-channel\n"
    "                     blocks with 8x8 outputs or more, on AVX-512: faster, ~10x the\n"
    "                     rounding error; else as auto) (TCV_CONV_ALGO, or auto)\n"
    "  --profile          then 3 more steps with every kernel call timed (--profile-steps N):\n"
    "                     a table of calls and ms per step per kernel entry point\n"
    "  --json             one JSON line instead of text\n"
    "\n"
    "data: generates JPEGs, reads them through ImageFolder with RandomResizedCrop + flip +\n"
    "normalize and a DataLoader; prints images/s per number of workers.\n"
    "  --images N         JPEGs to generate (500)\n"
    "  --size S           their size, S x S (256)\n"
    "  --crop S           RandomResizedCrop size (224)\n"
    "  --batch B          batch size (32)\n"
    "  --workers LIST     worker counts, comma-separated (0,1,2)\n"
    "  --epochs E         timed epochs per worker count, the best reported (1)\n"
    "  --dir DIR          keep the JPEGs in DIR (reused when present); default: a temp dir\n"
    "  --json             one JSON line instead of text\n"
    "\n"
    "Threads: OMP_NUM_THREADS.\n";

double mib(int64_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

int run(int argc, char** argv) {
  if (argc < 2)
    throw tcv::bench::UsageError{"a subcommand (train, data, allreduce or ddp) is required"};
  const std::string cmd = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (cmd == "allreduce") {
    for (const auto& a : args)
      if (a == "--help" || a == "-h") {
        std::cout << tcv::bench::kAllreduceUsage;
        return 0;
      }
    return tcv::bench::run_allreduce_bench(tcv::bench::parse_allreduce_args(args));
  }
  if (cmd == "ddp") {
    for (const auto& a : args)
      if (a == "--help" || a == "-h") {
        std::cout << tcv::bench::kDdpUsage;
        return 0;
      }
    return tcv::bench::run_ddp_project(tcv::bench::parse_ddp_args(args));
  }
  for (const auto& a : args)
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    }
  if (cmd == "--help" || cmd == "-h") {
    std::cout << kUsage << "\n" << tcv::bench::kAllreduceUsage << "\n" << tcv::bench::kDdpUsage;
    return 0;
  }
  if (cmd == "train") {
    const auto opts = tcv::bench::parse_train_args(args);
    const auto r = tcv::bench::run_train_bench(opts);
    if (opts.json) {
      std::cout << tcv::json_dump(tcv::bench::train_result_json(opts, r)) << "\n";
    } else {
      std::printf("%s, batch %lld of %lldx%lldx%lld, %s, %s %s, %lld parameters\n",
                  opts.model.c_str(), static_cast<long long>(opts.batch),
                  static_cast<long long>(opts.channels), static_cast<long long>(opts.image_size),
                  static_cast<long long>(opts.image_size), r.outputs.c_str(), opts.device.c_str(),
                  opts.dtype.c_str(), static_cast<long long>(r.parameters));
      std::printf("  %.1f images/s, %.2f ms/step (median of %lld steps after %lld warm-up)\n",
                  r.images_per_sec, r.ms_per_step, static_cast<long long>(opts.steps),
                  static_cast<long long>(opts.warmup));
      std::printf("  peak RSS %.1f MiB, %s allocator peak %.1f MiB (reserved %.1f MiB)\n",
                  mib(r.peak_rss), opts.device == "cpu" ? "host" : "device", mib(r.allocator_peak),
                  mib(r.allocator_reserved));
      if (opts.profile_steps > 0)
        std::printf(
            "kernels over %lld more steps (%s):\n%s", static_cast<long long>(opts.profile_steps),
            opts.device == "cpu" ? "wall time" : "device time from CUDA events",
            tcv::profiler::format_table(r.profile, opts.profile_steps, r.ms_per_step).c_str());
    }
    return 0;
  }
  if (cmd == "data") {
    const auto opts = tcv::bench::parse_data_args(args);
    const auto runs = tcv::bench::run_data_bench(opts);
    if (opts.json) {
      std::cout << tcv::json_dump(tcv::bench::data_result_json(opts, runs)) << "\n";
    } else {
      std::printf(
          "DataLoader: %lld JPEGs %lldx%lld -> RandomResizedCrop %lld + flip + normalize, "
          "batch %lld\n",
          static_cast<long long>(opts.images), static_cast<long long>(opts.size),
          static_cast<long long>(opts.size), static_cast<long long>(opts.crop),
          static_cast<long long>(opts.batch));
      for (const auto& r : runs)
        std::printf("  workers %d: %8.1f images/s (%lld images in %.2f s)\n", r.workers,
                    r.images_per_sec, static_cast<long long>(r.images), r.seconds);
    }
    return 0;
  }
  throw tcv::bench::UsageError{"unknown subcommand '" + cmd + "' (train, data, allreduce or ddp)"};
}

}  // namespace

int main(int argc, char** argv) {
  return tcv::apps::run_tool("tcv-bench", kUsage, [&] { return run(argc, argv); });
}
