// tcv-predict: the top-5 classes of images under a trained model.
//
//   tcv-predict --checkpoint CKPT --config CFG [--set key=value]... [--json] [--top K]
//               [--idx-index N]... IMAGE_OR_DIR...
//
// An image that cannot be read (corrupt, missing) is reported and the others are
// predicted. Exit status: 0 when every image was predicted, or the unreadable
// ones skipped under data.skip_corrupt = true; 1 when an image could not be read
// otherwise (or none could), or on another error; 2 for a bad command line or
// config.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include "apps/cli.h"
#include "data/dataset.h"
#include "data/image.h"
#include "engine/json.h"
#include "train/config.h"
#include "train/predict.h"
#include "train/trainer.h"

namespace fs = std::filesystem;

namespace {

constexpr const char* kUsage =
    "usage: tcv-predict --checkpoint CKPT --config CFG [--set key=value]... [--json]\n"
    "                   [--top K] [--idx-index N]... IMAGE_OR_DIR...\n"
    "\n"
    "Prints the top classes of each image under a model trained by tcv-train.\n"
    "\n"
    "  --checkpoint CKPT  a checkpoint (e.g. RUN/checkpoints/best.safetensors)\n"
    "                     or a run directory (its latest checkpoint)\n"
    "  --config CFG       the training config (RUN/config.toml is the resolved one)\n"
    "  --set key=value    overrides one config key (repeatable)\n"
    "  --json             one JSON document instead of text\n"
    "  --top K            classes per image (default 5)\n"
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
  int64_t top = 5;
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
      top = integer("--top");
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
  if (top < 1) throw tcv::apps::UsageError{"--top must be at least 1"};

  tcv::train::Config cfg = tcv::train::Config::from_file(config_path);
  for (const auto& s : sets) cfg.set_override(s);
  cfg.validate();
  const tcv::train::Predictor predictor(cfg, ckpt);
  const auto mode =
      predictor.in_channels() == 1 ? tcv::data::ImageMode::gray : tcv::data::ImageMode::rgb;

  const bool skip_corrupt = cfg.get_bool("data.skip_corrupt");
  std::vector<Input> inputs;
  std::vector<Unreadable> unreadable;
  auto read = [&](const std::string& file) {
    try {
      inputs.push_back({file, tcv::data::read_image(file, mode)});
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
        files.test_images, files.test_labels, cfg.get_int("data.num_classes"));
    for (int64_t n : idx_indices) {
      if (n >= test.size())
        throw tcv::apps::UsageError{"--idx-index " + std::to_string(n) + ": the test split has " +
                                    std::to_string(test.size()) + " images"};
      inputs.push_back({"idx:" + std::to_string(n), test.images().select(0, n).contiguous(),
                        test.labels().select(0, n).item<int64_t>()});
    }
  }

  tcv::Json out = tcv::Json::object();
  out["checkpoint"] = predictor.checkpoint();
  out["model"] = cfg.get_string("network.model_name");
  tcv::Json preds = tcv::Json::array();
  for (const auto& in : inputs) {
    const auto scores = predictor.predict(in.image, top);
    if (json) {
      tcv::Json j = tcv::Json::object();
      j["input"] = in.name;
      if (in.label >= 0) j["label"] = in.label;
      tcv::Json t = tcv::Json::array();
      for (const auto& s : scores)
        t.push_back(tcv::Json::object({{"class", s.index}, {"name", s.name}, {"prob", s.prob}}));
      j["top"] = std::move(t);
      preds.push_back(std::move(j));
      continue;
    }
    std::cout << in.name;
    if (in.label >= 0) std::cout << " (true: " << predictor.class_names().at(in.label) << ")";
    std::cout << "\n";
    for (size_t r = 0; r < scores.size(); ++r)
      std::cout << "  " << r + 1 << ". " << std::fixed << std::setprecision(4) << scores[r].prob
                << "  " << scores[r].index << " " << scores[r].name << "\n";
  }
  if (json) {
    out["predictions"] = std::move(preds);
    tcv::Json bad = tcv::Json::array();
    for (const auto& u : unreadable)
      bad.push_back(tcv::Json::object({{"input", u.name}, {"error", u.error}}));
    out["unreadable"] = std::move(bad);
    std::cout << tcv::json_dump(out, 2) << "\n";
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
