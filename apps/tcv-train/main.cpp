// tcv-train: trains a model from a TOML config.
//
//   tcv-train --config FILE [--set key=value]... [--device D] [--amp M] [--out DIR]
//   tcv-train --list-models | --list-datasets | --list-tasks
//
// Exit status: 0 on success, 2 for a bad command line or config, 1 otherwise.
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "apps/cli.h"
#include "models/registry.h"
#include "train/config.h"
#include "train/task.h"
#include "train/trainer.h"

namespace {

constexpr const char* kUsage =
    "usage: tcv-train --config FILE [--set key=value]... [--device D] [--amp M] [--out DIR]\n"
    "                 [--phase train|test] [--results FILE]\n"
    "       tcv-train --list-models | --list-datasets | --list-tasks | --help\n"
    "\n"
    "Trains a model as the TOML config FILE says (see configs/).\n"
    "\n"
    "  --config FILE      the config (TOML; unknown keys are errors)\n"
    "  --set key=value    overrides one key, value in TOML syntax (repeatable):\n"
    "                       --set solver.lr.base_lr=0.05 --set network.model_name=fmnist_resnet\n"
    "  --device D         cpu | cuda | auto (same as --set device=D; auto = the GPU when\n"
    "                     one is present)\n"
    "  --amp M            off | bf16 | f16 mixed precision (--set train.amp=M): bf16 on CUDA\n"
    "                     or on a CPU with bf16 instructions (AVX512_BF16, AMX), f16 on CUDA\n"
    "  --out DIR          run directory (default: runs/<config name>); receives\n"
    "                     config.toml (resolved), metrics.jsonl and checkpoints/\n"
    "  --phase P          train (default) | test: evaluate the checkpoint network.resume names\n"
    "                     on the val split as a training run's evaluation does (the same\n"
    "                     metrics, row \"split\": \"test\" in metrics.jsonl, report.html;\n"
    "                     default run directory runs/<config name>-test)\n"
    "  --results FILE     (implies --phase test) evaluates a COCO results file against the\n"
    "                     val split, no model: detection (image_id, category_id, bbox\n"
    "                     [x, y, w, h], score; the coco metric prints COCOeval's table) or\n"
    "                     pose (image_id, category_id 1, keypoints [x, y, v] x 17, score);\n"
    "                     segmentation: a folder of label PNGs, <id>.png (or _labelIds.png)\n"
    "  --list-models      prints the registered models and exits\n"
    "  --list-datasets    prints each task's data sets (data.dataset) and exits\n"
    "  --list-tasks       prints the registered tasks (task) and exits\n"
    "  --help             prints this and exits\n"
    "\n"
    "Resume a run with --set network.resume=DIR (its checkpoints/latest.safetensors);\n"
    "test a checkpoint with --phase test --set network.resume=FILE.\n";

int run(int argc, char** argv) {
  std::string config_path, out_dir;
  std::vector<std::string> sets;
  std::string list;  // "models", "datasets" or "tasks"
  tcv::train::Phase phase = tcv::train::Phase::train;
  std::string results;
  tcv::apps::Args args(argc, argv);
  while (args.next()) {
    const std::string& a = args.arg();
    auto is = [&](const std::string& flag) { return args.is(flag); };
    auto value = [&](const std::string& flag) { return args.value(flag); };
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (a == "--list-models" || a == "--list-datasets" || a == "--list-tasks") {
      list = a.substr(std::string("--list-").size());
    } else if (is("--config")) {
      config_path = value("--config");
    } else if (is("--set")) {
      sets.push_back(value("--set"));
    } else if (is("--device")) {
      sets.push_back("device=\"" + value("--device") + "\"");
    } else if (is("--amp")) {
      sets.push_back("train.amp=\"" + value("--amp") + "\"");
    } else if (is("--out")) {
      out_dir = value("--out");
    } else if (is("--results")) {
      results = value("--results");
      phase = tcv::train::Phase::test;
    } else if (is("--phase")) {
      const std::string p = value("--phase");
      if (p != "train" && p != "test")
        throw tcv::apps::UsageError{"--phase: train or test, got '" + p + "'"};
      phase = p == "test" ? tcv::train::Phase::test : tcv::train::Phase::train;
    } else {
      throw tcv::apps::UsageError{"unknown argument '" + a + "'"};
    }
  }
  tcv::train::register_builtin_tasks();  // their keys join the config schema
  if (!list.empty()) {
    tcv::models::register_builtin_models();
    std::cout << (list == "models"     ? tcv::models::model_listing()
                  : list == "datasets" ? tcv::train::dataset_listing()
                                       : tcv::train::task_listing());
    return 0;
  }
  if (config_path.empty()) throw tcv::apps::UsageError{"--config FILE is required"};
  if (!results.empty() && phase != tcv::train::Phase::test)
    throw tcv::apps::UsageError{"--results evaluates a results file: it is the test phase"};

  tcv::train::Config cfg = tcv::train::Config::from_file(config_path);
  cfg.set_overrides(sets);
  cfg.validate();
  if (out_dir.empty())
    out_dir = (std::filesystem::path("runs") / (std::filesystem::path(config_path).stem().string() +
                                                (phase == tcv::train::Phase::test ? "-test" : "")))
                  .string();

  tcv::train::TrainOptions opts;
  opts.out_dir = out_dir;
  opts.phase = phase;
  opts.results = results;
  opts.log = &std::cout;
  tcv::train::Trainer trainer(std::move(cfg), opts);
  trainer.run();
  const char* rank = std::getenv("RANK");  // data-parallel: rank 0 speaks for the run
  if (!rank || std::string(rank) == "0") std::cout << "run directory: " << out_dir << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tcv::apps::run_tool("tcv-train", kUsage, [&] { return run(argc, argv); });
}
