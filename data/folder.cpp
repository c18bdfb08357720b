#include "data/folder.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

namespace tcv::data {

namespace fs = std::filesystem;

bool path_exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec) && !ec;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

namespace {

constexpr int64_t kMaxClasses = int64_t{1} << 31;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool has_extension(const std::string& name, const std::vector<std::string>& exts) {
  const std::string l = lower(name);
  return std::any_of(exts.begin(), exts.end(), [&](const std::string& e) {
    return l.size() >= e.size() && l.compare(l.size() - e.size(), e.size(), lower(e)) == 0;
  });
}

int64_t max_label_plus_one(const std::vector<std::pair<std::string, int64_t>>& s) {
  int64_t m = 0;
  for (const auto& p : s) m = std::max(m, p.second + 1);
  return m;
}

}  // namespace

ImageFileDataset::ImageFileDataset(std::vector<std::pair<std::string, int64_t>> samples,
                                   int64_t num_classes, Transform transform, ImageFileOptions opts,
                                   std::string name)
    : samples_(std::move(samples)),
      num_classes_(num_classes),
      transform_(std::move(transform)),
      opts_(std::move(opts)),
      name_(std::move(name)) {
  TCV_CHECK(num_classes_ > 0, name_, ": num_classes must be positive, got ", num_classes_);
  for (const auto& [path, label] : samples_)
    TCV_CHECK(label >= 0 && label < num_classes_, name_, ": label ", label, " of ", path,
              " is outside [0, ", num_classes_, ")");
}

Sample ImageFileDataset::get(int64_t i, Rng& rng) const {
  return make(i, rng, false);
}

Sample ImageFileDataset::get_for_batch(int64_t i, Rng& rng) const {
  return make(i, rng, true);
}

Sample ImageFileDataset::make(int64_t i, Rng& rng, bool defer) const {
  TCV_CHECK(i >= 0 && i < size(), name_, ": sample index ", i, " out of range [0, ", size(), ")");
  const auto& [path, label] = samples_[static_cast<size_t>(i)];
  Tensor img;
  if (!skips_.attempt(opts_.on_corrupt, [&] { img = read_image(path, opts_.mode, opts_.limits); }))
    return Sample{Tensor(), label, {}};
  Sample s{img, label, {}};
  if (transform_)
    s.image = defer ? apply_deferring(transform_, img, rng, s.deferred) : transform_(img, rng);
  return s;
}

std::string ImageFileDataset::first_skipped() const {
  return skips_.first();
}

ImageFolder::Scan ImageFolder::scan(const std::string& root, const ImageFileOptions& opts) {
  std::error_code ec;
  TCV_CHECK(fs::is_directory(root, ec), root, ": ImageFolder root is not a directory");
  Scan s;
  for (const auto& e :
       fs::directory_iterator(root, fs::directory_options::follow_directory_symlink))
    if (e.is_directory()) s.classes.push_back(e.path().filename().string());
  std::sort(s.classes.begin(), s.classes.end());
  TCV_CHECK(!s.classes.empty(), root, ": ImageFolder found no class directories");
  for (size_t c = 0; c < s.classes.size(); ++c) {
    // Like sorted(os.walk(...)) then sorted(fnames): by directory, then file name.
    std::vector<std::pair<std::string, std::string>> files;
    const fs::path dir = fs::path(root) / s.classes[c];
    for (const auto& e :
         fs::recursive_directory_iterator(dir, fs::directory_options::follow_directory_symlink)) {
      if (e.is_directory()) continue;
      const std::string fname = e.path().filename().string();
      if (has_extension(fname, opts.extensions))
        files.emplace_back(e.path().parent_path().string(), fname);
    }
    std::sort(files.begin(), files.end());
    std::string known;
    for (const auto& x : opts.extensions) known += " " + x;
    TCV_CHECK(!files.empty(), dir.string(), ": class '", s.classes[c],
              "' has no image file (extensions:", known, ")");
    for (const auto& [d, f] : files)
      s.samples.emplace_back((fs::path(d) / f).string(), static_cast<int64_t>(c));
  }
  return s;
}

ImageFolder::ImageFolder(const std::string& root, Transform transform, ImageFileOptions opts)
    : ImageFolder(scan(root, opts), root, std::move(transform), opts) {}

ImageFolder::ImageFolder(Scan s, const std::string& root, Transform transform,
                         ImageFileOptions opts)
    : ImageFileDataset(std::move(s.samples), static_cast<int64_t>(s.classes.size()),
                       std::move(transform), std::move(opts), root),
      classes_(std::move(s.classes)) {
  for (size_t c = 0; c < classes_.size(); ++c) class_to_idx_[classes_[c]] = static_cast<int64_t>(c);
}

std::vector<std::pair<std::string, int64_t>> ListFileDataset::parse(const std::string& list_path,
                                                                    const std::string& root,
                                                                    int64_t num_classes) {
  std::ifstream f(list_path);
  TCV_CHECK(f.good(), list_path, ": cannot open list file");
  const fs::path base = root.empty() ? fs::path(list_path).parent_path() : fs::path(root);
  std::vector<std::pair<std::string, int64_t>> out;
  std::string line;
  int64_t lineno = 0;
  while (std::getline(f, line)) {
    ++lineno;
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    size_t start = 0;
    while (start < line.size() && std::isspace(static_cast<unsigned char>(line[start]))) ++start;
    line = line.substr(start);
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.find_last_of(" \t");
    TCV_CHECK(sp != std::string::npos, list_path, ":", lineno, ": expected 'path label', got '",
              line, "'");
    std::string path = line.substr(0, sp);
    while (!path.empty() && std::isspace(static_cast<unsigned char>(path.back()))) path.pop_back();
    const std::string lab = line.substr(sp + 1);
    int64_t label = -1;
    size_t used = 0;
    try {
      label = std::stoll(lab, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    TCV_CHECK(used == lab.size() && label >= 0, list_path, ":", lineno, ": label '", lab,
              "' is not a non-negative integer");
    // The class count is the largest label + 1 and sizes the model's head.
    TCV_CHECK(label < kMaxClasses, list_path, ":", lineno, ": label ", label,
              " is too large (at most ", kMaxClasses - 1, ")");
    TCV_CHECK(num_classes <= 0 || label < num_classes, list_path, ":", lineno, ": label ", label,
              " is outside [0, ", num_classes, ")");
    TCV_CHECK(!path.empty(), list_path, ":", lineno, ": empty path");
    const fs::path p(path);
    out.emplace_back((p.is_absolute() ? p : base / p).string(), label);
  }
  TCV_CHECK(!f.bad(), list_path, ": read error");
  TCV_CHECK(!out.empty(), list_path, ": list file has no samples");
  return out;
}

ListFileDataset::ListFileDataset(const std::string& list_path, const std::string& root,
                                 int64_t num_classes, Transform transform, ImageFileOptions opts)
    : ListFileDataset(
          [&] {
            auto s = parse(list_path, root, num_classes);
            const int64_t k = num_classes > 0 ? num_classes : max_label_plus_one(s);
            return Parsed(std::move(s), k);
          }(),
          list_path, std::move(transform), std::move(opts)) {}

ListFileDataset::ListFileDataset(Parsed parsed, const std::string& list_path, Transform transform,
                                 ImageFileOptions opts)
    : ImageFileDataset(std::move(parsed.first), parsed.second, std::move(transform),
                       std::move(opts), list_path) {}

}  // namespace tcv::data
