// Training configs: TOML files (toml++) checked against a schema of known keys
// with types, defaults and valid values, using TorchCV's key names
// ("train.batch_size", "solver.lr.base_lr", "network.model_name", ...).
//
// Unknown keys, wrong types and bad values are errors that name the file, the
// line and the key; an unknown key also suggests the closest known one. Any key
// can be overridden from the command line with "--set key=value".
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "dist/comm_hook.h"
#include "engine/error.h"
#include "tcv/core/conv_algo.h"
#include "train/lr_policy.h"

namespace tcv::train {

/// The most iterations a run may count, 2^40 (about 1.1e12): solver.max_iters,
/// solver.max_epoch times an epoch's iterations, and a checkpoint's iteration.
inline constexpr int64_t kMaxIterations = int64_t{1} << 40;

/// The most data loader threads (data.workers) a run may ask for.
inline constexpr int64_t kMaxWorkers = 256;

enum class ValueType : uint8_t {
  boolean,
  integer,
  floating,
  string,
  float_array,
  int_array,
  string_array,
  float_lists,  ///< an array of arrays of numbers, e.g. anchor.aspect_ratio_list
};

const char* value_type_name(ValueType t);

/// A config value of one of the schema's types.
using ConfigValue =
    std::variant<bool, int64_t, double, std::string, std::vector<double>, std::vector<int64_t>,
                 std::vector<std::string>, std::vector<std::vector<double>>>;

/// One known key of the schema.
struct KeySpec {
  std::string key;  ///< dotted, e.g. "solver.lr.base_lr"
  ValueType type;
  ConfigValue default_value;
  std::string help;
  /// The tasks that read the key (train/task.h); empty: every task.
  std::vector<std::string> tasks{};
};

/// Short names for writing key tables: `using namespace key_types;`.
namespace key_types {
using VT = ValueType;
using Doubles = std::vector<double>;
using Ints = std::vector<int64_t>;
using Strings = std::vector<std::string>;
}  // namespace key_types

/// Every key tcv-train knows, in the order the resolved config is written: the
/// keys every task reads, then each registered task's own (train/task.h's
/// register_task adds them: call register_builtin_tasks() before reading configs).
const std::vector<KeySpec>& config_schema();

/// The spec of `key`, or null when no task knows it.
const KeySpec* find_key_spec(const std::string& key);

/// Adds a task's keys to the schema: a key already there (declared by another
/// task) must have the same type and default and becomes that task's too.
/// Called by register_task(); Configs made earlier do not hold the new keys.
void add_task_keys(const std::string& task, const std::vector<KeySpec>& keys);

class Config;

/// What the config code knows of a task: register_task() (train/task.h) hands
/// each task's schema over, so the config code needs nothing above it.
struct TaskSchema {
  std::string name;
  std::string description;
  /// The values of data.dataset the task reads.
  std::vector<std::string> datasets;
  std::vector<KeySpec> keys;
  /// Config::validate runs them last for a config of this task.
  std::function<void(const Config&)> validate;
};

/// Makes `schema.name` a value of the key "task": adds its keys (add_task_keys)
/// and its checks, and lists it and its data sets in the help of "task" and
/// "data.dataset". A name taken twice is an error.
void add_task_schema(TaskSchema schema);
/// The tasks added, in order.
std::vector<std::string> schema_task_names();

/// Thrown for a bad config file, key or value (tcv-train exits with status 2).
class ConfigError : public Error {
 public:
  using Error::Error;
};

/// device: where the run computes.
enum class DeviceChoice : uint8_t { cpu, cuda, automatic };
/// train.amp: mixed precision.
enum class AmpMode : uint8_t { off, bf16, f16 };
/// solver.optim.optim_method.
enum class OptimMethod : uint8_t { sgd, adam, adamw };
/// solver.nonfinite: what a step whose loss or gradients hold inf or NaN does.
enum class NonFinite : uint8_t { stop, skip };
/// network.bucket_plan: how the gradient buckets are cut.
enum class BucketPlanChoice : uint8_t { timed, cap };

/// network.*: the model and data parallelism.
struct NetworkConfig {
  std::string model_name;
  bool distributed = false;
  bool sync_bn = false;
  double bucket_cap_mb = 25.0;
  BucketPlanChoice bucket_plan = BucketPlanChoice::timed;
  bool find_unused_parameters = false;
  std::string comm_hook;  ///< one of dist::comm_hook_names()
  /// network.powersgd.*: rank, start_iter, min_compression_rate,
  /// error_feedback, warm_start.
  dist::PowerSGDOptions powersgd;
  double timeout = 300.0;           ///< seconds
  double wait_log_interval = 30.0;  ///< seconds; 0 = never
  std::string resume;               ///< "" = none, "auto" = the newest checkpoint
  std::string pretrained;           ///< "" = none
};

/// solver.lr.*: the learning-rate policy.
struct LrConfig {
  double base_lr = 0.1;
  LrPolicyKind lr_policy = LrPolicyKind::fixed;
  bool per_epoch = true;  ///< solver.lr.metric "epoch" (else "iters")
  double step_gamma = 0.1;
  int64_t step_size = 30;
  double multistep_gamma = 0.1;
  std::vector<int64_t> stepvalue;
  double poly_power = 0.9;
  bool is_warm = false;
  int64_t warm_iters = 0;
  int64_t warm_epochs = 0;
};

/// solver.optim.adam.* or solver.optim.adamw.*.
struct AdamConfig {
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
};

/// solver.optim.*.
struct OptimConfig {
  OptimMethod method = OptimMethod::sgd;
  bool nodecay_bn_bias = false;
  double sgd_momentum = 0.9;
  double sgd_weight_decay = 0;
  bool sgd_nesterov = false;
  AdamConfig adam, adamw;
};

/// solver.*: how long, how often, and the optimizer.
struct SolverConfig {
  int64_t max_epoch = 10;
  int64_t max_iters = 0;  ///< 0 = by epochs
  int64_t display_iter = 50;
  int64_t test_interval = 0;
  int64_t save_epoch = 1;
  int64_t save_iters = 0;
  double clip_grad_norm = 0;  ///< 0 = off
  NonFinite nonfinite = NonFinite::stop;
  LrConfig lr;
  OptimConfig optim;
};

/// data.normalize.*: x = (pixel / div_value - mean) / std, per channel (one
/// value stands for every channel).
struct NormalizeConfig {
  double div_value = 255.0;
  std::vector<double> mean, std;
};

/// data.* that every task reads.
struct DataConfig {
  std::string dataset;
  std::string data_dir;
  bool skip_corrupt = false;
  int64_t max_pixels = 0;
  int64_t num_classes = 10;
  int64_t workers = 1;
  NormalizeConfig normalize;
};

/// train.* that every task reads.
struct TrainConfig {
  int64_t batch_size = 64;
  AmpMode amp = AmpMode::off;
  ConvAlgo conv_algo = ConvAlgo::automatic;  ///< how CPU f32 convolutions run
  bool conv_algo_set = false;  ///< set in the file or by --set (else TCV_CONV_ALGO decides)
  bool drop_last = true;
};

/// val.* that every task reads.
struct ValConfig {
  int64_t batch_size = 500;
  int64_t max_images = 0;  ///< 0 = all
};

/// The keys every task reads, typed and checked (Config::settings()). The
/// tasks' own keys (anchors, test modes, augmentations, ...) are parsed by each
/// task's file into its own struct.
struct Settings {
  std::string task;
  uint64_t seed = 0;
  DeviceChoice device = DeviceChoice::automatic;
  int64_t keep_last = 3;  ///< checkpoints.keep_last
  NetworkConfig network;
  SolverConfig solver;
  DataConfig data;
  TrainConfig train;
  ValConfig val;
};

/// A resolved config: every schema key has a value (its default unless set).
class Config {
 public:
  /// All defaults.
  Config();

  /// Parses a TOML file; errors name "file:line".
  static Config from_file(const std::string& path);
  /// Parses TOML text; `name` stands for the file in errors.
  static Config from_string(const std::string& toml, const std::string& name = "<string>");

  /// Applies "key=value"; the value is TOML (42, 0.1, true, "text", [1, 2]); a bare
  /// word is taken as a string for string keys.
  void set_override(const std::string& assignment);
  /// Applies each in order, as tcv-train's repeated --set.
  void set_overrides(const std::vector<std::string>& assignments);

  /// Checks the values (ranges, choices, combinations, and the task's own checks);
  /// errors name key and line. A key set in the file or by --set that belongs to
  /// another task than `task` is an error saying whose it is.
  /// from_file/from_string/set_override do not; call this once all overrides are in.
  void validate() const;

  /// The keys every task reads, parsed and checked (as validate() checks them,
  /// the task's own checks aside) on the first call after the last change; later
  /// calls return the same struct. Errors are validate()'s.
  const Settings& settings() const;

  bool get_bool(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  double get_double(const std::string& key) const;  ///< integers convert
  const std::string& get_string(const std::string& key) const;
  std::vector<double> get_doubles(const std::string& key) const;
  std::vector<int64_t> get_ints(const std::string& key) const;
  std::vector<std::string> get_strings(const std::string& key) const;
  std::vector<std::vector<double>> get_float_lists(const std::string& key) const;
  const ConfigValue& get(const std::string& key) const;
  /// Where the value came from: "file.toml:12", "--set", or "default".
  std::string source(const std::string& key) const;
  /// Whether the value was set (in the file, by --set or in code), not a default.
  bool is_set(const std::string& key) const { return source(key) != "default"; }

  /// Sets a value in code (type-checked against the schema).
  void set(const std::string& key, ConfigValue value, const std::string& source = "code");

  /// The resolved config as TOML: every key of its task (and those every task
  /// reads), grouped by table in schema order.
  std::string to_toml() const;
  /// The file this config was read from ("" when none).
  const std::string& path() const { return path_; }

  /// Throws ConfigError "<where it was set>: key: msg".
  [[noreturn]] void fail(const std::string& key, const std::string& msg) const;

 private:
  void load_table(const void* table, const std::string& prefix, const std::string& file);

  std::map<std::string, ConfigValue> values_;
  std::map<std::string, std::string> sources_;
  std::string path_;
  mutable std::shared_ptr<const Settings> settings_;  ///< null until settings(), or after a change
};

/// The known key closest to `key` (edit distance over dotted names), or "".
std::string closest_key(const std::string& key);

/// The checks Config::validate and the tasks' validators make of single keys;
/// each failure is a ConfigError naming the key and where it was set.
class ConfigChecks {
 public:
  explicit ConfigChecks(const Config& cfg) : cfg_(cfg) {}
  /// A string key holds one of `valid`.
  void choice(const std::string& key, const std::vector<std::string>& valid) const;
  /// An integer key is >= lo.
  void at_least(const std::string& key, int64_t lo) const;
  /// A number is finite and > 0, >= 0, in [0, 1) or in [0, 1].
  void positive(const std::string& key) const;
  void non_negative(const std::string& key) const;
  void in_unit(const std::string& key) const;
  void probability(const std::string& key) const;
  /// A string key is not empty; `why` ends the message ("with data.dataset \"voc\"").
  void required(const std::string& key, const std::string& why) const;
  /// A number array holds `n` values (n < 0: any number) with low <= high when n is 2.
  void range_pair(const std::string& key, double lo, double hi) const;
  [[noreturn]] void fail(const std::string& key, const std::string& msg) const {
    cfg_.fail(key, msg);
  }

 private:
  const Config& cfg_;
};

/// A value as TOML text ("0.1", "[1, 2]", "\"voc\"").
std::string format_value(const ConfigValue& v);
/// A double as TOML writes it ("0.1", "2.0", "inf").
std::string format_double(double v);
/// "a, b, c".
std::string join(const std::vector<std::string>& v);

}  // namespace tcv::train
