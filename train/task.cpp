#include "train/task.h"

#include <algorithm>
#include <mutex>

#include "dist/ddp.h"
#include "models/registry.h"
#include "train/checkpoint.h"
#include "train/tasks/cls.h"
#include "train/tasks/det.h"
#include "train/tasks/pose.h"
#include "train/tasks/seg.h"

namespace tcv::train {

namespace {

std::vector<TaskInfo>& registry() {
  static std::vector<TaskInfo> tasks;
  return tasks;
}

std::recursive_mutex& registry_mutex() {
  static std::recursive_mutex mu;
  return mu;
}

}  // namespace

Tensor StepModel::forward(const Tensor& x) {
  return ddp_ ? ddp_->forward(x) : model_.forward(x);
}

std::vector<Tensor> StepModel::forward_with(
    const std::function<std::vector<Tensor>(nn::Module&)>& fn) {
  return ddp_ ? ddp_->forward_with(fn) : fn(model_);
}

void register_task(TaskInfo info) {
  std::lock_guard<std::recursive_mutex> lock(registry_mutex());
  auto& tasks = registry();
  TCV_CHECK(std::none_of(tasks.begin(), tasks.end(),
                         [&](const TaskInfo& t) { return t.name == info.name; }),
            "[register_task] task \"", info.name, "\" is registered already");
  add_task_keys(info.name, info.keys);
  tasks.push_back(std::move(info));
}

void register_builtin_tasks() {
  std::lock_guard<std::recursive_mutex> lock(registry_mutex());
  static bool done = false;
  if (done) return;
  done = true;
  register_task(cls_task_info());
  register_task(det_task_info());
  register_task(seg_task_info());
  register_task(pose_task_info());
}

const TaskInfo& task_info(const std::string& name) {
  register_builtin_tasks();
  std::lock_guard<std::recursive_mutex> lock(registry_mutex());
  for (const auto& t : registry())
    if (t.name == name) return t;
  throw ConfigError("unknown task \"" + name + "\" (known: " + join(task_names()) + ")");
}

std::vector<std::string> task_names() {
  register_builtin_tasks();
  std::lock_guard<std::recursive_mutex> lock(registry_mutex());
  std::vector<std::string> names;
  for (const auto& t : registry()) names.push_back(t.name);
  return names;
}

std::unique_ptr<Task> make_task(const Config& cfg) {
  return task_info(cfg.get_string("task")).make(cfg);
}

std::string at_key(const Config& cfg, const std::string& key) {
  const std::string src = cfg.source(key);
  return (src == "default" ? "" : src + ": ") + key;
}

std::shared_ptr<nn::Module> create_config_model(const Config& cfg, int64_t num_classes,
                                                int64_t in_channels) {
  models::register_builtin_models();
  const std::string& name = cfg.get_string("network.model_name");
  try {
    return models::create_model(name, {num_classes, in_channels});
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    throw ConfigError(at_key(cfg, "network.model_name") + ": " + e.what());
  }
}

std::string load_model_for_prediction(const Config& cfg, const std::string& checkpoint,
                                      nn::Module& model) {
  const std::string stem = resolve_checkpoint(checkpoint);
  const TrainerState s = load_trainer_state(stem);
  const std::string& name = cfg.get_string("network.model_name");
  if (s.model_name != name)
    throw ConfigError(stem + ".safetensors holds a \"" + s.model_name +
                      "\", but the config's network.model_name is \"" + name + "\"");
  if (s.task != cfg.get_string("task"))
    throw ConfigError(stem + ".safetensors holds a model of task \"" + s.task +
                      "\", but the config has task = \"" + cfg.get_string("task") + "\"");
  load_checkpoint(stem, model, nullptr);
  model.eval();
  return stem;
}

}  // namespace tcv::train
