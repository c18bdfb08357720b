#include "models/registry.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>

#include "layers/init.h"
#include "models/cls/fmnist.h"
#include "models/cls/mobilenet_v2.h"
#include "models/cls/resnet.h"
#include "models/cls/vgg.h"
#include "models/det/ssd.h"
#include "models/pose/openpose.h"
#include "models/seg/segmentation.h"

namespace tcv::models {

namespace {

struct Entry {
  ModelFactory factory;
  ModelSpec spec;
  std::any typed;                          // the family's own builder, or empty
  std::optional<int64_t> parameter_count;  // counted on first request
};

struct Registry {
  std::mutex mu;
  std::map<std::string, Entry> entries;  // sorted, so listings are too
};

Registry& registry() {
  static Registry r;
  return r;
}

std::string known_names(const std::map<std::string, Entry>& entries) {
  if (entries.empty()) return "none registered; call register_builtin_models() first";
  std::string s;
  for (const auto& [name, e] : entries) s += (s.empty() ? "" : ", ") + name;
  return s;
}

// The entry of `name` (r.mu held); an unknown name is an error of `op` listing the known ones.
Entry& entry_of(Registry& r, const std::string& name, const char* op) {
  auto it = r.entries.find(name);
  TCV_CHECK(it != r.entries.end(), "[", op, "] unknown model \"", name,
            "\" (known: ", known_names(r.entries), ")");
  return it->second;
}

}  // namespace

void register_model(ModelSpec spec, ModelFactory factory, std::any typed) {
  TCV_CHECK(!spec.name.empty(), "[register_model] empty model name");
  TCV_CHECK(factory != nullptr, "[register_model] \"", spec.name, "\" has no factory");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  TCV_CHECK(!r.entries.count(spec.name), "[register_model] \"", spec.name,
            "\" is already registered");
  const std::string name = spec.name;
  r.entries[name] = Entry{std::move(factory), std::move(spec), std::move(typed), std::nullopt};
}

void register_model(const std::string& name, ModelFactory factory, const std::string& description,
                    const ModelOptions& reference) {
  register_model({.name = name, .description = description, .reference = reference},
                 std::move(factory));
}

std::any family_builder(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const auto it = r.entries.find(name);
  return it == r.entries.end() ? std::any() : it->second.typed;
}

std::shared_ptr<nn::Module> create_model(const std::string& name, const ModelOptions& opts) {
  ModelFactory factory;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    factory = entry_of(r, name, "create_model").factory;
  }
  TCV_CHECK(opts.num_classes > 0, "[create_model] ", name, ": num_classes must be positive, got ",
            opts.num_classes);
  TCV_CHECK(opts.in_channels > 0, "[create_model] ", name, ": in_channels must be positive, got ",
            opts.in_channels);
  return factory(opts);
}

std::vector<std::string> model_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const auto& [name, e] : r.entries) names.push_back(name);
  return names;
}

std::vector<std::string> model_names(const std::string& family) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const auto& [name, e] : r.entries)
    if (e.spec.family == family) names.push_back(name);
  return names;
}

std::string model_description(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return entry_of(r, name, "model_description").spec.description;
}

ModelOptions model_reference_options(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return entry_of(r, name, "model_reference_options").spec.reference;
}

int64_t model_parameter_count(const std::string& name) {
  ModelOptions reference;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    const Entry& e = entry_of(r, name, "model_parameter_count");
    if (e.parameter_count) return *e.parameter_count;
    reference = e.spec.reference;
  }
  int64_t count = 0;
  {
    nn::init::SkipInitGuard shapes_only;  // nothing drawn: quick, and the generators stay put
    // A model without classes (0 in its reference) ignores num_classes.
    if (reference.num_classes == 0) reference.num_classes = 1;
    count = create_model(name, reference)->num_parameters();
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.entries.at(name).parameter_count = count;
  return count;
}

namespace {
// 11689512 -> "11,689,512".
std::string with_thousands(int64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}
}  // namespace

std::string model_listing() {
  const std::vector<std::string> names = model_names();
  size_t width = 0;
  for (const std::string& n : names) width = std::max(width, n.size());
  std::string out;
  for (const std::string& n : names) {
    const ModelOptions ref = model_reference_options(n);
    std::string count = with_thousands(model_parameter_count(n));
    out += n + std::string(width - n.size() + 2, ' ') +
           std::string(11 - std::min<size_t>(11, count.size()), ' ') + count + " parameters (" +
           (ref.num_classes > 0 ? std::to_string(ref.num_classes) + " classes, " : std::string()) +
           std::to_string(ref.in_channels) +
           (ref.in_channels == 1 ? " channel)  " : " channels)  ") + model_description(n) + "\n";
  }
  return out;
}

void register_builtin_models() {
  static std::once_flag once;
  std::call_once(once, [] {
    cls::register_fmnist_models();
    cls::register_resnet_models();
    cls::register_vgg_models();
    cls::register_mobilenet_models();
    det::register_ssd_models();
    seg::register_segmentation_models();
    pose::register_openpose_models();
  });
}

}  // namespace tcv::models
