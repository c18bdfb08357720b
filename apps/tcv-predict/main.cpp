// tcv-predict: a trained model of any task applied to images: the top classes
// (classification), boxes with labels and scores (detection), class maps
// (segmentation), people's keypoints and skeletons (pose).
//
//   tcv-predict --checkpoint CKPT --config CFG [--set key=value]... [--json] [--top K]
//               [--out DIR] [--score-threshold T] [--label-ids] [--idx-index N]...
//               IMAGE_OR_DIR...
//
// An image that cannot be read (corrupt, missing) is reported and the others are
// predicted. Exit status: 0 when every image was predicted, or the unreadable
// ones skipped under data.skip_corrupt = true; 1 when an image could not be read
// otherwise (or none could), or on another error; 2 for a bad command line or
// config.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "apps/cli.h"
#include "data/dataset.h"
#include "data/image.h"
#include "engine/value.h"
#include "train/config.h"
#include "train/data_setup.h"
#include "train/task.h"

namespace fs = std::filesystem;

namespace {

constexpr const char* kUsage =
    "usage: tcv-predict --checkpoint CKPT --config CFG [--set key=value]... [--json]\n"
    "                   [--top K] [--out DIR] [--score-threshold T] [--label-ids]\n"
    "                   [--idx-index N]... IMAGE_OR_DIR...\n"
    "\n"
    "Applies a model trained by tcv-train to images, as the config's task does:\n"
    "classification prints the top classes of each image; detection prints the boxes\n"
    "(original image pixels) with labels and scores and draws them; segmentation\n"
    "writes each image's class map as a colour overlay and as a label PNG; pose prints\n"
    "the people found (COCO keypoints, original pixels) and draws their skeletons.\n"
    "\n"
    "  --checkpoint CKPT  a checkpoint (e.g. RUN/checkpoints/best.safetensors)\n"
    "                     or a run directory (its latest checkpoint)\n"
    "  --config CFG       the training config (RUN/config.toml is the resolved one)\n"
    "  --set key=value    overrides one config key (repeatable)\n"
    "  --json             one JSON document instead of text (pose: each image's\n"
    "                     \"people\" in COCO's results format)\n"
    "  --top K            classification: classes per image (default 5)\n"
    "  --out DIR          detection, segmentation and pose: where pictures go\n"
    "                     (created; default: none): <stem>_det.png (boxes drawn),\n"
    "                     <stem>_overlay.png and <stem>_label.png, or\n"
    "                     <stem>_pose.png (skeletons drawn)\n"
    "  --score-threshold T  detection: boxes from this score on (default:\n"
    "                     res.vis_conf_thre)\n"
    "  --label-ids        segmentation: label PNGs hold Cityscapes label ids (for\n"
    "                     the benchmark's submissions) instead of train ids\n"
    "  --idx-index N      also classifies test image N of the config's IDX dataset\n"
    "                     (repeatable); its true label is printed too\n"
    "  IMAGE_OR_DIR       image files (PNG, JPEG, BMP, ...) or directories of them\n"
    "  --help             prints this and exits\n"
    "\n"
    "An image that cannot be read is reported on stderr (and under \"unreadable\" with\n"
    "--json) and the others are predicted. Exit status: 0 when every image was\n"
    "predicted, or the unreadable ones skipped with --set data.skip_corrupt=true; 1 when\n"
    "an image could not be read otherwise, or none could; 2 for a bad command line.\n";

bool is_image_file(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* e : {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tga", ".pgm", ".ppm"})
    if (ext == e) return true;
  return false;
}

struct Unreadable {
  std::string name, error;
};

struct Input {
  std::string name;
  tcv::Tensor image;   // u8 (C, H, W)
  int64_t label = -1;  // known for IDX test images
};

int run(int argc, char** argv) {
  std::string ckpt, config_path;
  std::vector<std::string> sets, paths;
  std::vector<int64_t> idx_indices;
  bool json = false;
  tcv::train::PredictOptions popts;
  tcv::apps::Args args(argc, argv);
  while (args.next()) {
    const std::string& a = args.arg();
    auto is = [&](const std::string& flag) { return args.is(flag); };
    auto value = [&](const std::string& flag) { return args.value(flag); };
    auto integer = [&](const std::string& flag) {
      const std::string v = value(flag);
      try {
        size_t end = 0;
        const long long n = std::stoll(v, &end);
        if (end == v.size() && n >= 0) return static_cast<int64_t>(n);
      } catch (const std::exception&) {
      }
      throw tcv::apps::UsageError{flag + ": expected a non-negative integer, got '" + v + "'"};
    };
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (a == "--json") {
      json = true;
    } else if (is("--checkpoint")) {
      ckpt = value("--checkpoint");
    } else if (is("--config")) {
      config_path = value("--config");
    } else if (is("--set")) {
      sets.push_back(value("--set"));
    } else if (is("--top")) {
      popts.top = integer("--top");
    } else if (is("--out")) {
      popts.out_dir = value("--out");
    } else if (is("--score-threshold")) {
      const std::string v = value("--score-threshold");
      char* end = nullptr;
      popts.score_threshold = std::strtod(v.c_str(), &end);
      if (v.empty() || end != v.c_str() + v.size() || !(popts.score_threshold >= 0))
        throw tcv::apps::UsageError{"--score-threshold: expected a number >= 0, got '" + v + "'"};
    } else if (a == "--label-ids") {
      popts.label_ids = tcv::train::PredictOptions::LabelIds::cityscapes;
    } else if (is("--idx-index")) {
      idx_indices.push_back(integer("--idx-index"));
    } else if (a.rfind("--", 0) == 0) {
      throw tcv::apps::UsageError{"unknown argument '" + a + "'"};
    } else {
      paths.push_back(a);
    }
  }
  if (ckpt.empty()) throw tcv::apps::UsageError{"--checkpoint CKPT is required"};
  if (config_path.empty()) throw tcv::apps::UsageError{"--config CFG is required"};
  if (paths.empty() && idx_indices.empty())
    throw tcv::apps::UsageError{"give at least one IMAGE_OR_DIR (or --idx-index N)"};
  if (popts.top < 1) throw tcv::apps::UsageError{"--top must be at least 1"};

  tcv::train::register_builtin_tasks();  // their keys join the config schema
  tcv::train::Config cfg = tcv::train::Config::from_file(config_path);
  cfg.set_overrides(sets);
  cfg.validate();
  const std::unique_ptr<tcv::train::Task> task = tcv::train::make_task(cfg);
  const std::unique_ptr<tcv::train::TaskPredictor> predictor = task->make_predictor(ckpt, popts);
  const auto mode = predictor->image_mode();
  const tcv::data::ImageLimits limits = tcv::train::image_limits(cfg);
  const tcv::train::Settings& settings = cfg.settings();

  const bool skip_corrupt = settings.data.skip_corrupt;
  std::vector<Input> inputs;
  std::vector<Unreadable> unreadable;
  auto read = [&](const std::string& file) {
    try {
      inputs.push_back({file, tcv::data::read_image(file, mode, limits)});
    } catch (const tcv::Error& e) {
      unreadable.push_back({file, e.what()});
      std::cerr << "tcv-predict: " << (skip_corrupt ? "skipped (data.skip_corrupt): " : "error: ")
                << e.what() << "\n";
    }
  };
  for (const auto& p : paths) {
    if (fs::is_directory(p)) {
      std::vector<fs::path> files;
      for (const auto& e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file() && is_image_file(e.path())) files.push_back(e.path());
      std::sort(files.begin(), files.end());
      if (files.empty()) throw tcv::Error(p + ": directory holds no image files");
      for (const auto& f : files) read(f.string());
    } else {
      read(p);
    }
  }
  if (!idx_indices.empty()) {
    const auto files = tcv::data::find_idx_files(tcv::train::resolve_data_dir(cfg));
    const auto test = tcv::data::ImageClassificationDataset::from_idx(
        files.test_images, files.test_labels, settings.data.num_classes);
    for (int64_t n : idx_indices) {
      if (n >= test.size())
        throw tcv::apps::UsageError{"--idx-index " + std::to_string(n) + ": the test split has " +
                                    std::to_string(test.size()) + " images"};
      inputs.push_back({"idx:" + std::to_string(n), test.images().select(0, n).contiguous(),
                        test.labels().select(0, n).item<int64_t>()});
    }
  }

  tcv::Value out = tcv::Value::object();
  out["checkpoint"] = predictor->checkpoint();
  out["model"] = settings.network.model_name;
  tcv::Value preds = tcv::Value::array();
  for (const auto& in : inputs) {
    const tcv::Value entry = predictor->predict(in.image, in.name, in.label);
    if (!json) {
      predictor->print(std::cout, in.name, entry);
      continue;
    }
    tcv::Value j = tcv::Value::object();
    j["input"] = in.name;
    for (const auto& [k, v] : entry.members()) j[k] = v;
    preds.push_back(std::move(j));
  }
  if (json) {
    out["predictions"] = std::move(preds);
    tcv::Value bad = tcv::Value::array();
    for (const auto& u : unreadable)
      bad.push_back(tcv::Value::object({{"input", u.name}, {"error", u.error}}));
    out["unreadable"] = std::move(bad);
    std::cout << out.dump(2) << "\n";
  }
  if (unreadable.empty()) return 0;
  std::cerr << "tcv-predict: " << unreadable.size() << " of " << unreadable.size() + inputs.size()
            << " images could not be read"
            << (skip_corrupt ? " and were skipped (data.skip_corrupt = true)"
                             : " (--set data.skip_corrupt=true skips them)")
            << "\n";
  return skip_corrupt && !inputs.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return tcv::apps::run_tool("tcv-predict", kUsage, [&] { return run(argc, argv); });
}
