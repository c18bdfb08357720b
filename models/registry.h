// Models by name. Filled by an explicit register_builtin_models() call, not by
// static initialisers that a static link would drop.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "layers/module.h"

namespace tcv::models {

struct ModelOptions {
  int64_t num_classes = 10;
  int64_t in_channels = 3;
};

using ModelFactory = std::function<std::shared_ptr<nn::Module>(const ModelOptions&)>;

void register_model(const std::string& name, ModelFactory factory, const std::string& description);
/// Builds a model; an unknown name is an error listing the known ones.
std::shared_ptr<nn::Module> create_model(const std::string& name, const ModelOptions& opts);
/// Known names, sorted.
std::vector<std::string> model_names();
std::string model_description(const std::string& name);
/// Registers every model shipped with tcv (idempotent).
void register_builtin_models();

}  // namespace tcv::models
