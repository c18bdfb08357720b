// Models by name. Each model family registers its own names (register_*_models
// in its .cpp); register_builtin_models() calls those, one line per family: an
// explicit call, not static initialisers that a static link would drop.
#pragma once

#include <any>
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

/// What a family says of one of its models.
struct ModelSpec {
  std::string name;
  /// The task the model serves ("cls", "det", "seg", "pose"): a task builds the
  /// models of its family and lists them when network.model_name names another.
  std::string family = "cls";
  std::string description;
  /// The options its listing counts parameters at (the classes and input
  /// channels the description speaks of); num_classes 0: a model without classes.
  ModelOptions reference = {};
};

/// Registers a model built from ModelOptions alone. `typed`: the family's own
/// builder (see register_family_model), or empty. A name taken twice is an error.
void register_model(ModelSpec spec, ModelFactory factory, std::any typed = {});
/// The same for a model of no task's own (family "cls").
void register_model(const std::string& name, ModelFactory factory, const std::string& description,
                    const ModelOptions& reference = {});

/// Registers a model that its family builds from the family's own options
/// (SsdOptions, SegModelOptions, OpenPoseOptions): create_model sets their
/// num_classes (where they have one) and in_channels, create_family_model passes
/// all of them.
template <class Model, class Options>
void register_family_model(ModelSpec spec, std::function<std::shared_ptr<Model>(Options)> build) {
  ModelFactory generic = [build](const ModelOptions& o) -> std::shared_ptr<nn::Module> {
    Options opts;
    opts.in_channels = o.in_channels;
    if constexpr (requires { opts.num_classes; }) opts.num_classes = o.num_classes;
    return build(std::move(opts));
  };
  register_model(std::move(spec), std::move(generic), std::any(std::move(build)));
}

/// One model of a family's table (register_family_models).
template <class Model, class Options>
struct FamilyEntry {
  std::string name;
  std::shared_ptr<Model> (*build)(Options);
  std::string description;
};

/// Registers a table of a family's models with one reference.
template <class Model, class Options>
void register_family_models(const std::string& family, const ModelOptions& reference,
                            const std::vector<FamilyEntry<Model, Options>>& entries) {
  for (const auto& e : entries)
    register_family_model<Model, Options>(
        {.name = e.name, .family = family, .description = e.description, .reference = reference},
        e.build);
}

/// The family builder registered for `name` (empty when none or unknown).
std::any family_builder(const std::string& name);

/// Builds `name` with its family's options; null when no model of that name was
/// registered with a builder of Model from Options (another family's name).
template <class Model, class Options>
std::shared_ptr<Model> create_family_model(const std::string& name, Options opts) {
  const std::any builder = family_builder(name);
  const auto* build = std::any_cast<std::function<std::shared_ptr<Model>(Options)>>(&builder);
  return build ? (*build)(std::move(opts)) : nullptr;
}

/// Builds a model; an unknown name is an error listing the known ones.
std::shared_ptr<nn::Module> create_model(const std::string& name, const ModelOptions& opts);
/// Known names, sorted.
std::vector<std::string> model_names();
/// The names of one family ("cls", "det", "seg", "pose"), sorted.
std::vector<std::string> model_names(const std::string& family);
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
/// Registers every model shipped with tcv, family by family (idempotent).
void register_builtin_models();

}  // namespace tcv::models
