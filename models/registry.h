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

/// Registers `name`. `reference`: the options its listing counts parameters at
/// (the classes and input channels the description speaks of).
void register_model(const std::string& name, ModelFactory factory, const std::string& description,
                    const ModelOptions& reference = {});
/// Builds a model; an unknown name is an error listing the known ones.
std::shared_ptr<nn::Module> create_model(const std::string& name, const ModelOptions& opts);
/// Known names, sorted.
std::vector<std::string> model_names();
std::string model_description(const std::string& name);
/// The options a model's listing counts its parameters at.
ModelOptions model_reference_options(const std::string& name);
/// The number of parameters of the model at its reference options, counted on
/// the model itself (built once for its shapes, without drawing initial values,
/// nn::init::SkipInitGuard) and cached.
int64_t model_parameter_count(const std::string& name);
/// One line per registered model, as tcv-train --list-models prints them: the
/// name, the parameter count (model_parameter_count) with the classes and input
/// channels it is counted at, and the description.
std::string model_listing();
/// Registers every model shipped with tcv (idempotent).
void register_builtin_models();

}  // namespace tcv::models
