#include "train/task.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>

#include "dist/ddp.h"
#include "engine/ops.h"
#include "models/registry.h"
#include "train/checkpoint.h"
#include "train/report.h"
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

// ---- the evaluators' base ------------------------------------------------------------

namespace {
constexpr size_t kReportFigures = 6;
}  // namespace

TaskEvaluator::TaskEvaluator(std::string what, int64_t rank, int64_t world,
                             std::string figures_title)
    : what_(std::move(what)), rank_(rank), world_(world), figures_title_(std::move(figures_title)) {
  TCV_CHECK(world >= 1 && rank >= 0 && rank < world, what_, ": rank ", rank, " of ", world);
}

TaskEvaluator::~TaskEvaluator() = default;

void TaskEvaluator::reset() {
  loss_.reset();
  figures_.clear();
  reset_metric();
}

std::string TaskEvaluator::serialize() const {
  ByteWriter w;
  w.put<double>(loss_.sum());
  w.put<int64_t>(loss_.count());
  write_metric(w);
  return w.take();
}

void TaskEvaluator::merge(const std::string& bytes) {
  ByteReader r(bytes, what_);
  const auto sum = r.get<double>();
  const auto n = r.get<int64_t>();
  TCV_CHECK(n >= 0, what_, ": malformed state");
  read_metric(r);
  TCV_CHECK(r.done(), what_, ": malformed state");
  loss_.add(sum, n);
}

Value TaskEvaluator::row() const {
  Value j = Value::object(), details = Value::object();
  fill_row(j, details);
  if (!from_results_) j["loss"] = loss_.mean();  // a results file has no loss
  j["images"] = images();
  for (auto& [key, value] : details.members()) j[key] = std::move(value);
  return j;
}

void TaskEvaluator::fill_report(ReportInputs& report) const {
  report_metric(report);
  if (figures_title_.empty()) return;
  report.figures = figures_;
  report.figures_title = figures_title_;
}

void TaskEvaluator::add_owned_loss(const Tensor& loss, const std::vector<int64_t>& indices) {
  const auto mine =
      std::count_if(indices.begin(), indices.end(), [&](int64_t i) { return owned(i); });
  if (mine > 0) loss_.update(loss.item(), mine);
}

std::string TaskEvaluator::row_words(const Value& row, const std::vector<std::string>& keys,
                                     const std::string& setting) {
  std::string out;
  char buf[64];
  for (const std::string& k : keys) {
    const Value& v = row.at(k);
    std::snprintf(buf, sizeof(buf), "%.4f", v.is_number() ? v.as_double() : NAN);
    out += (out.empty() ? "" : " ") + k + " " + buf;
  }
  if (row.contains("loss")) {
    std::snprintf(buf, sizeof(buf), " loss %.4f", row.at("loss").as_double());
    out += buf;
  }
  return out + " (" + setting + ", " + std::to_string(row.at("images").as_int()) + " images)";
}

bool TaskEvaluator::wants_figure() const {
  return figures_.size() < kReportFigures;
}

void TaskEvaluator::keep_figure(ReportFigure figure) {
  figures_.push_back(std::move(figure));
}

// ---- the task registry -----------------------------------------------------------------

void register_task(TaskInfo info) {
  std::lock_guard<std::recursive_mutex> lock(registry_mutex());
  auto& tasks = registry();
  TCV_CHECK(std::none_of(tasks.begin(), tasks.end(),
                         [&](const TaskInfo& t) { return t.name == info.name; }),
            "[register_task] task \"", info.name, "\" is registered already");
  std::vector<std::string> datasets;
  for (const DatasetInfo& d : info.datasets) datasets.push_back(d.name);
  add_task_schema({.name = info.name,
                   .description = info.description,
                   .datasets = std::move(datasets),
                   .keys = info.keys,
                   .validate = info.validate});
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
  return task_info(cfg.settings().task).make(cfg);
}

const DatasetInfo& dataset_info(const Config& cfg) {
  const std::vector<DatasetInfo>& datasets = task_info(cfg.settings().task).datasets;
  const std::string& name = cfg.settings().data.dataset;
  for (const DatasetInfo& d : datasets)
    if (d.name == name) return d;
  ConfigChecks(cfg).choice("data.dataset", dataset_names(cfg.settings().task));
  throw ConfigError(at_key(cfg, "data.dataset") + ": unknown data set \"" + name + "\"");
}

const DatasetInfo& check_dataset(const Config& cfg) {
  const DatasetInfo& d = dataset_info(cfg);
  for (const std::string& key : d.required)
    ConfigChecks(cfg).required(key, "with data.dataset \"" + d.name + "\"");
  return d;
}

std::vector<std::string> dataset_names(const std::string& task) {
  std::vector<std::string> names;
  for (const DatasetInfo& d : task_info(task).datasets) names.push_back(d.name);
  return names;
}

namespace {

// Rows of cells, each column padded to its widest cell (the last one not).
std::string table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], row[c].size());
    }
  std::string out;
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c)
      out += c + 1 < row.size() ? row[c] + std::string(width[c] - row[c].size() + 2, ' ') : row[c];
    out += "\n";
  }
  return out;
}

}  // namespace

std::string dataset_listing() {
  std::vector<std::vector<std::string>> rows;
  for (const std::string& task : task_names())
    for (const DatasetInfo& d : task_info(task).datasets)
      rows.push_back({task, d.name, d.description});
  return table(rows);
}

std::string task_listing() {
  std::vector<std::vector<std::string>> rows;
  for (const std::string& task : task_names()) rows.push_back({task, task_info(task).description});
  return table(rows);
}

std::string at_key(const Config& cfg, const std::string& key) {
  const std::string src = cfg.source(key);
  return (src == "default" ? "" : src + ": ") + key;
}

std::shared_ptr<nn::Module> create_config_model(const Config& cfg, int64_t num_classes,
                                                int64_t in_channels) {
  models::register_builtin_models();
  const std::string& name = cfg.settings().network.model_name;
  try {
    return models::create_model(name, {num_classes, in_channels});
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    throw ConfigError(at_key(cfg, "network.model_name") + ": " + e.what());
  }
}

ConfigError not_a_task_model(const Config& cfg, const std::string& kind) {
  const std::string& task = cfg.settings().task;
  return ConfigError(at_key(cfg, "network.model_name") + ": \"" +
                     cfg.settings().network.model_name + "\" is not a " + kind +
                     " model (task = \"" + task + "\" trains " + join(models::model_names(task)) +
                     ")");
}

std::string load_model_for_prediction(const Config& cfg, const std::string& checkpoint,
                                      nn::Module& model) {
  const std::string stem = resolve_checkpoint(checkpoint);
  const TrainerState s = load_trainer_state(stem);
  const Settings& st = cfg.settings();
  const std::string& name = st.network.model_name;
  if (s.model_name != name)
    throw ConfigError(stem + ".safetensors holds a \"" + s.model_name +
                      "\", but the config's network.model_name is \"" + name + "\"");
  if (s.task != st.task)
    throw ConfigError(stem + ".safetensors holds a model of task \"" + s.task +
                      "\", but the config has task = \"" + st.task + "\"");
  load_checkpoint(stem, model, nullptr);
  model.eval();
  return stem;
}

Tensor StepContext::global_normalized(const Tensor& loss, double local, double floor) const {
  if (world == 1) return loss;
  const double global = std::max(floor, sum_over_ranks(local));
  const double scale = std::max(floor, local) * static_cast<double>(world) / global;
  return scale == 1.0 ? loss : ops::mul(loss, scale);
}

}  // namespace tcv::train
