#include "models/registry.h"

#include <map>
#include <mutex>

#include "models/cls/fmnist.h"

namespace tcv::models {

namespace {

struct Entry {
  ModelFactory factory;
  std::string description;
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

}  // namespace

void register_model(const std::string& name, ModelFactory factory, const std::string& description) {
  TCV_CHECK(!name.empty(), "[register_model] empty model name");
  TCV_CHECK(factory != nullptr, "[register_model] \"", name, "\" has no factory");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  TCV_CHECK(!r.entries.count(name), "[register_model] \"", name, "\" is already registered");
  r.entries[name] = Entry{std::move(factory), description};
}

std::shared_ptr<nn::Module> create_model(const std::string& name, const ModelOptions& opts) {
  ModelFactory factory;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.entries.find(name);
    TCV_CHECK(it != r.entries.end(), "[create_model] unknown model \"", name,
              "\" (known: ", known_names(r.entries), ")");
    factory = it->second.factory;
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

std::string model_description(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.entries.find(name);
  TCV_CHECK(it != r.entries.end(), "[model_description] unknown model \"", name,
            "\" (known: ", known_names(r.entries), ")");
  return it->second.description;
}

void register_builtin_models() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_model(
        "fmnist_cnn",
        [](const ModelOptions& o) {
          return std::make_shared<cls::FmnistCnn>(o.num_classes, o.in_channels);
        },
        "2-conv CNN for 28x28 images (conv32-pool-conv64-pool-fc128-fc), 421,642 parameters for "
        "1 channel and 10 classes");
    register_model(
        "fmnist_resnet",
        [](const ModelOptions& o) {
          return std::make_shared<cls::FmnistResNet>(o.num_classes, o.in_channels);
        },
        "small CIFAR-style ResNet for 28x28 images: 3x3 stem, BasicBlocks x2 at 32/64/128 "
        "channels, global average pool, fc");
  });
}

}  // namespace tcv::models
