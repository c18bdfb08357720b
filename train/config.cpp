#include "train/config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <string_view>

#include "data/image.h"
#include "dist/comm_hook.h"

namespace tcv::train {

namespace {

using namespace key_types;

// The keys every task reads; each task adds its own (register_task).
std::vector<KeySpec> common_keys() {
  return {
      // "task" and "data.dataset" have their help from the tasks (add_task_schema).
      {"task", VT::string, std::string("cls"), ""},
      {"seed", VT::integer, int64_t{0}, "seeds parameter init, shuffling and dropout"},
      {"device", VT::string, std::string("auto"), "cpu | cuda | auto"},
      {"data.dataset", VT::string, std::string("fashion_mnist"), ""},
      {"data.data_dir", VT::string, std::string(""),
       "the data set's root (cls: IDX or CIFAR binary files; \"\" = "
       "/usr/share/datasets/<dataset> for IDX)"},
      {"data.skip_corrupt", VT::boolean, false,
       "skip and count corrupt or missing images instead of stopping with an error"},
      {"data.max_pixels", VT::integer, data::kDefaultMaxPixels,
       "images (and label maps) whose header announces more pixels are refused before they are "
       "decoded, as possible decompression bombs; the default is PIL's limit"},
      {"data.num_classes", VT::integer, int64_t{10}, ""},
      {"data.workers", VT::integer, int64_t{1},
       "threads assembling batches ahead (at most 256); 0 = inline"},
      {"data.normalize.div_value", VT::floating, 255.0, "pixels are divided by this first"},
      {"data.normalize.mean", VT::float_array, Doubles{0.2860}, "one value or one per channel"},
      {"data.normalize.std", VT::float_array, Doubles{0.3530}, "one value or one per channel"},
      {"train.batch_size", VT::integer, int64_t{64}, ""},
      {"train.amp", VT::string, std::string("off"),
       "mixed precision: off | bf16 | f16 (f16 with dynamic loss scaling; CUDA only); bf16 on "
       "the CPU where it has bf16 instructions (AVX512_BF16 or AMX)"},
      {"train.conv_algo", VT::string, std::string("auto"),
       "CPU f32 convolutions: auto (tcv's Winograd F(2x2, 3x3) in the three passes of the 3x3 "
       "stride-1 layers it fits, and its stride-2 split of 3x3 stride-2 layers with padding 1, "
       "each within its rounding-error bound and near direct's error (stride-2 backward-data "
       "up to 6x it, docs/conv_accuracy.md); "
       "direct elsewhere) | direct (oneDNN's direct kernels everywhere, as PyTorch) | winograd "
       "(oneDNN's F(4x4, 3x3) in every pass of the 3x3 layers it fits on AVX-512: faster, about "
       "10x the rounding error and no exact zeros; else as auto); unset: TCV_CONV_ALGO, else "
       "auto"},
      {"train.drop_last", VT::boolean, true, ""},
      {"val.batch_size", VT::integer, int64_t{500}, ""},
      {"val.max_images", VT::integer, int64_t{0}, "evaluate on the first N test images; 0 = all"},
      {"network.model_name", VT::string, std::string("fmnist_cnn"), "see tcv-train --list-models"},
      {"network.distributed", VT::boolean, false,
       "data-parallel training over the processes tcv-run starts (RANK, WORLD_SIZE, ...)"},
      {"network.sync_bn", VT::boolean, false,
       "distributed: BatchNorm statistics over the global batch (SyncBatchNorm)"},
      {"network.bucket_cap_mb", VT::floating, 25.0, "distributed: gradient bucket size (MiB)"},
      {"network.bucket_plan", VT::string, std::string("timed"),
       "distributed: timed (cut the buckets from measured gradient and all-reduce times, after "
       "4 steps) | cap (PyTorch's rule: 1 MiB, then bucket_cap_mb; the same cut in every run, so "
       "runs of 3+ ranks repeat bit for bit)"},
      {"network.find_unused_parameters", VT::boolean, false,
       "distributed: allow parameters that get no gradient in a step"},
      {"network.comm_hook", VT::string, std::string("none"),
       "distributed: what each gradient bucket sends, as PyTorch DDP's comm hooks: none (its own "
       "dtype) | bf16 | fp16 (cast, half the bytes) | powersgd (low rank, network.powersgd.*)"},
      {"network.powersgd.rank", VT::integer, int64_t{1},
       "powersgd: matrix_approximation_rank r (a tensor viewed as n x m sends (n + m) r values)"},
      {"network.powersgd.start_iter", VT::integer, int64_t{1000},
       "powersgd: plain all-reduce for the first N synchronised steps (start_powerSGD_iter; > 1 "
       "with error_feedback or warm_start)"},
      {"network.powersgd.min_compression_rate", VT::floating, 2.0,
       "powersgd: compress a tensor only when n m > rate x (n + m) r; others go as they are"},
      {"network.powersgd.error_feedback", VT::boolean, true,
       "powersgd: add each rank's last compression error to its next gradient"},
      {"network.powersgd.warm_start", VT::boolean, true,
       "powersgd: start each step's power iteration from the last step's Q"},
      {"network.timeout", VT::floating, 300.0,
       "distributed: seconds the rendezvous or one collective may wait for the other ranks "
       "before the run stops with an error naming them"},
      {"network.wait_log_interval", VT::floating, 30.0,
       "distributed: seconds between the lines a waiting rank prints about what it waits for; "
       "0 = never"},
      {"network.resume", VT::string, std::string(""),
       "checkpoint to continue from; \"auto\" = the newest complete one in the run directory "
       "(none yet: start fresh); \"\" = none"},
      {"network.pretrained", VT::string, std::string(""),
       "weights to fine-tune from (safetensors, torchvision names); a head of another shape "
       "keeps its init"},
      {"solver.max_epoch", VT::integer, int64_t{10}, ""},
      {"solver.max_iters", VT::integer, int64_t{0}, "stop after N iterations; 0 = by epochs"},
      {"solver.display_iter", VT::integer, int64_t{50}, "log training loss every N iterations"},
      {"solver.test_interval", VT::integer, int64_t{0},
       "evaluate every N iterations; 0 = per epoch"},
      {"solver.save_epoch", VT::integer, int64_t{1}, "epoch checkpoint every N epochs; 0 = none"},
      {"solver.save_iters", VT::integer, int64_t{0}, "also save `latest` every N iterations"},
      {"solver.lr.base_lr", VT::floating, 0.1, ""},
      {"solver.lr.lr_policy", VT::string, std::string("fixed"),
       "fixed | step | multistep | cosine | lambda_poly (= poly)"},
      {"solver.lr.metric", VT::string, std::string("epoch"),
       "epoch | iters: unit of step_size and stepvalue, and how often cosine and "
       "lambda_poly change"},
      {"solver.lr.step.gamma", VT::floating, 0.1, ""},
      {"solver.lr.step.step_size", VT::integer, int64_t{30}, ""},
      {"solver.lr.multistep.gamma", VT::floating, 0.1, ""},
      {"solver.lr.multistep.stepvalue", VT::int_array, Ints{}, "increasing"},
      {"solver.lr.lambda_poly.power", VT::floating, 0.9, ""},
      {"solver.lr.is_warm", VT::boolean, false, "linear warm-up"},
      {"solver.lr.warm.warm_iters", VT::integer, int64_t{0}, ""},
      {"solver.lr.warm.warm_epochs", VT::integer, int64_t{0},
       "warm-up length in epochs (instead of warm_iters); 0 = use warm_iters"},
      {"solver.clip_grad_norm", VT::floating, 0.0,
       "clip gradients to this global L2 norm before each step; 0 = off"},
      {"solver.nonfinite", VT::string, std::string("stop"),
       "a loss or gradient with inf or NaN: stop (with the iteration and the parameter) | "
       "skip (drop the step and count it); f16 loss scaling skips such gradients either way"},
      {"solver.optim.optim_method", VT::string, std::string("sgd"), "sgd | adam | adamw"},
      {"solver.optim.nodecay_bn_bias", VT::boolean, false,
       "no weight decay on parameters with dim <= 1 (BatchNorm weights, biases)"},
      {"solver.optim.sgd.momentum", VT::floating, 0.9, ""},
      {"solver.optim.sgd.weight_decay", VT::floating, 0.0, ""},
      {"solver.optim.sgd.nesterov", VT::boolean, false, ""},
      {"solver.optim.adam.betas", VT::float_array, Doubles{0.9, 0.999}, ""},
      {"solver.optim.adam.eps", VT::floating, 1e-8, ""},
      {"solver.optim.adam.weight_decay", VT::floating, 0.0, "L2, added to the gradient"},
      {"solver.optim.adamw.betas", VT::float_array, Doubles{0.9, 0.999}, ""},
      {"solver.optim.adamw.eps", VT::floating, 1e-8, ""},
      {"solver.optim.adamw.weight_decay", VT::floating, 0.01, "decoupled"},
      {"checkpoints.keep_last", VT::integer, int64_t{3}, "epoch checkpoints kept; 0 = all"},
  };
}

std::vector<KeySpec>& schema_storage() {
  static std::vector<KeySpec> schema = common_keys();
  return schema;
}

std::vector<TaskSchema>& task_storage() {
  static std::vector<TaskSchema> tasks;
  return tasks;
}

const KeySpec* find_spec(const std::string& key) {
  for (const auto& s : config_schema())
    if (s.key == key) return &s;
  return nullptr;
}

std::string tasks_text(const std::vector<std::string>& tasks) {
  std::string o;
  for (size_t i = 0; i < tasks.size(); ++i)
    o += (i == 0 ? "" : i + 1 == tasks.size() ? " and " : ", ") + tasks[i];
  return o;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string last_part(const std::string& k) {
  const auto p = k.rfind('.');
  return p == std::string::npos ? k : k.substr(p + 1);
}

std::string unknown_key_message(const std::string& key) {
  std::string msg = "unknown key '" + key + "'";
  std::vector<std::string> below;
  for (const auto& s : config_schema())
    if (s.key.rfind(key + ".", 0) == 0) below.push_back(s.key);
  if (!below.empty()) {
    msg += " (it is a table, not a value; its keys: ";
    for (size_t i = 0; i < below.size(); ++i) msg += (i ? ", " : "") + below[i];
    return msg + ")";
  }
  if (task_storage().empty())
    return msg +
           " (no task is registered, so no task's keys are known: call "
           "tcv::train::register_builtin_tasks() (train/task.h) before reading configs)";
  const std::string near = closest_key(key);
  if (!near.empty()) msg += " (did you mean '" + near + "'?)";
  return msg;
}

const char* node_type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table:
      return "table";
    case toml::node_type::array:
      return "array";
    case toml::node_type::string:
      return "string";
    case toml::node_type::integer:
      return "integer";
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::boolean:
      return "boolean";
    case toml::node_type::date:
      return "date";
    case toml::node_type::time:
      return "time";
    case toml::node_type::date_time:
      return "date-time";
    default:
      return "nothing";
  }
}

const char* expected_name(ValueType t) {
  switch (t) {
    case VT::boolean:
      return "a boolean";
    case VT::integer:
      return "an integer";
    case VT::floating:
      return "a number";
    case VT::string:
      return "a string";
    case VT::float_array:
      return "an array of numbers";
    case VT::int_array:
      return "an array of integers";
    case VT::string_array:
      return "an array of strings";
    case VT::float_lists:
      return "an array of arrays of numbers";
  }
  return "?";
}

// Converts a TOML node to the spec's type; returns an error text when it does not fit.
std::string convert(const toml::node& n, ValueType t, ConfigValue& out) {
  const std::string got =
      std::string("expected ") + expected_name(t) + ", got " + node_type_name(n);
  switch (t) {
    case VT::boolean:
      if (!n.is_boolean()) return got;
      out = *n.value<bool>();
      return "";
    case VT::integer:
      if (!n.is_integer()) return got;
      out = *n.value<int64_t>();
      return "";
    case VT::floating:
      if (!n.is_number()) return got;
      out = *n.value<double>();
      return "";
    case VT::string:
      if (!n.is_string()) return got;
      out = *n.value<std::string>();
      return "";
    case VT::float_array:
    case VT::int_array: {
      if (!n.is_array()) return got;
      Doubles d;
      Ints i;
      for (const auto& e : *n.as_array()) {
        if (t == VT::int_array ? !e.is_integer() : !e.is_number())
          return std::string("expected ") + expected_name(t) + ", got an array holding a " +
                 node_type_name(e);
        if (t == VT::int_array)
          i.push_back(*e.value<int64_t>());
        else
          d.push_back(*e.value<double>());
      }
      if (t == VT::int_array)
        out = i;
      else
        out = d;
      return "";
    }
    case VT::string_array: {
      if (!n.is_array()) return got;
      std::vector<std::string> v;
      for (const auto& e : *n.as_array()) {
        if (!e.is_string())
          return std::string("expected ") + expected_name(t) + ", got an array holding a " +
                 node_type_name(e);
        v.push_back(*e.value<std::string>());
      }
      out = std::move(v);
      return "";
    }
    case VT::float_lists: {
      if (!n.is_array()) return got;
      std::vector<Doubles> v;
      for (const auto& row : *n.as_array()) {
        if (!row.is_array())
          return std::string("expected ") + expected_name(t) + ", got an array holding a " +
                 node_type_name(row);
        Doubles d;
        for (const auto& e : *row.as_array()) {
          if (!e.is_number())
            return std::string("expected ") + expected_name(t) + ", got an inner array holding a " +
                   node_type_name(e);
          d.push_back(*e.value<double>());
        }
        v.push_back(std::move(d));
      }
      out = std::move(v);
      return "";
    }
  }
  return got;
}

}  // namespace

std::string format_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

namespace {

std::string quote(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        o += "\\\"";
        break;
      case '\\':
        o += "\\\\";
        break;
      case '\n':
        o += "\\n";
        break;
      case '\t':
        o += "\\t";
        break;
      case '\r':
        o += "\\r";
        break;
      default:
        // TOML allows no raw control characters in a string, DEL included.
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char b[8];
          std::snprintf(b, sizeof(b), "\\u%04x", c);
          o += b;
        } else {
          o += c;
        }
    }
  }
  return o + "\"";
}

// Why `s` cannot be a TOML string as it stands ("" when it can): TOML text is
// UTF-8 (no overlong forms, no surrogates); control characters need escapes.
std::string text_problem(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f)
      return "control character 0x" + std::string(1, "0123456789abcdef"[c >> 4]) +
             "0123456789abcdef"[c & 15] + " at byte " + std::to_string(i);
    if (c < 0x80) {
      ++i;
      continue;
    }
    const size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
    uint32_t cp = len == 4 ? c & 0x07u : len == 3 ? c & 0x0fu : c & 0x1fu;
    bool ok = len >= 2 && c <= 0xf4 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      ok = (d & 0xc0) == 0x80;
      cp = (cp << 6) | (d & 0x3fu);
    }
    const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (!ok || cp < least[len] || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000))
      return "bytes that are not UTF-8 at byte " + std::to_string(i);
    i += len;
  }
  return "";
}

}  // namespace

std::string format_value(const ConfigValue& v) {
  struct V {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return format_double(d); }
    std::string operator()(const std::string& s) const { return quote(s); }
    std::string operator()(const Doubles& a) const {
      std::string o = "[";
      for (size_t i = 0; i < a.size(); ++i) o += (i ? ", " : "") + format_double(a[i]);
      return o + "]";
    }
    std::string operator()(const Ints& a) const {
      std::string o = "[";
      for (size_t i = 0; i < a.size(); ++i) o += (i ? ", " : "") + std::to_string(a[i]);
      return o + "]";
    }
    std::string operator()(const std::vector<std::string>& a) const {
      std::string o = "[";
      for (size_t i = 0; i < a.size(); ++i) o += (i ? ", " : "") + quote(a[i]);
      return o + "]";
    }
    std::string operator()(const std::vector<Doubles>& a) const {
      std::string o = "[";
      for (size_t i = 0; i < a.size(); ++i) o += (i ? ", " : "") + (*this)(a[i]);
      return o + "]";
    }
  };
  return std::visit(V{}, v);
}

namespace {

bool type_matches(const ConfigValue& v, ValueType t) {
  switch (t) {
    case VT::boolean:
      return std::holds_alternative<bool>(v);
    case VT::integer:
      return std::holds_alternative<int64_t>(v);
    case VT::floating:
      return std::holds_alternative<double>(v);
    case VT::string:
      return std::holds_alternative<std::string>(v);
    case VT::float_array:
      return std::holds_alternative<Doubles>(v);
    case VT::int_array:
      return std::holds_alternative<Ints>(v);
    case VT::string_array:
      return std::holds_alternative<std::vector<std::string>>(v);
    case VT::float_lists:
      return std::holds_alternative<std::vector<Doubles>>(v);
  }
  return false;
}

}  // namespace

std::string join(const std::vector<std::string>& v) {
  std::string o;
  for (size_t i = 0; i < v.size(); ++i) o += (i ? ", " : "") + v[i];
  return o;
}

const char* value_type_name(ValueType t) {
  switch (t) {
    case VT::boolean:
      return "boolean";
    case VT::integer:
      return "integer";
    case VT::floating:
      return "float";
    case VT::string:
      return "string";
    case VT::float_array:
      return "float array";
    case VT::int_array:
      return "integer array";
    case VT::string_array:
      return "string array";
    case VT::float_lists:
      return "array of number arrays";
  }
  return "?";
}

const std::vector<KeySpec>& config_schema() {
  return schema_storage();
}

const KeySpec* find_key_spec(const std::string& key) {
  return find_spec(key);
}

void add_task_keys(const std::string& task, const std::vector<KeySpec>& keys) {
  std::vector<KeySpec>& schema = schema_storage();
  for (const KeySpec& k : keys) {
    auto it = std::find_if(schema.begin(), schema.end(),
                           [&](const KeySpec& s) { return s.key == k.key; });
    if (it == schema.end()) {
      schema.push_back(k);
      schema.back().tasks = {task};
      continue;
    }
    TCV_CHECK(!it->tasks.empty(), "[config] task ", task, " declares key ", k.key,
              ", which every task reads");
    TCV_CHECK(it->type == k.type && it->default_value == k.default_value, "[config] task ", task,
              " declares key ", k.key, " with another type or default than task ",
              it->tasks.front(), " does");
    if (std::find(it->tasks.begin(), it->tasks.end(), task) == it->tasks.end())
      it->tasks.push_back(task);
  }
}

void add_task_schema(TaskSchema schema) {
  std::vector<TaskSchema>& tasks = task_storage();
  TCV_CHECK(std::none_of(tasks.begin(), tasks.end(),
                         [&](const TaskSchema& t) { return t.name == schema.name; }),
            "[config] task \"", schema.name, "\" is registered already");
  add_task_keys(schema.name, schema.keys);
  tasks.push_back(std::move(schema));
  std::string task_help, dataset_help;
  for (const TaskSchema& t : tasks) {
    task_help += (task_help.empty() ? "" : " | ") + t.name + ": " + t.description;
    if (t.datasets.empty()) continue;
    dataset_help += (dataset_help.empty() ? "" : "; ") + t.name + ":";
    for (size_t i = 0; i < t.datasets.size(); ++i)
      dataset_help += (i == 0 ? " " : " | ") + t.datasets[i];
  }
  for (KeySpec& k : schema_storage()) {
    if (k.key == "task") k.help = task_help;
    if (k.key == "data.dataset") k.help = dataset_help;
  }
}

std::vector<std::string> schema_task_names() {
  std::vector<std::string> names;
  for (const TaskSchema& t : task_storage()) names.push_back(t.name);
  return names;
}

std::string closest_key(const std::string& key) {
  std::string best;
  size_t best_d = std::string::npos;
  for (const auto& s : config_schema()) {
    // A key in the wrong table ("batch_size" for "train.batch_size") is close too.
    size_t d = edit_distance(key, s.key);
    if (last_part(key) == last_part(s.key)) d = std::min<size_t>(d, 1);
    if (d < best_d) {
      best_d = d;
      best = s.key;
    }
  }
  const size_t limit = std::max<size_t>(3, key.size() / 3);
  return best_d <= limit ? best : "";
}

Config::Config() {
  for (const auto& s : config_schema()) {
    values_[s.key] = s.default_value;
    sources_[s.key] = "default";
  }
}

void Config::fail(const std::string& key, const std::string& msg) const {
  const auto it = sources_.find(key);
  const std::string src = it == sources_.end() || it->second == "default" ? "" : it->second + ": ";
  throw ConfigError(src + key + ": " + msg);
}

void Config::load_table(const void* table_ptr, const std::string& prefix, const std::string& file) {
  const auto& table = *static_cast<const toml::table*>(table_ptr);
  for (const auto& [k, node] : table) {
    const std::string key =
        prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    const auto line = node.source().begin.line ? node.source().begin.line : k.source().begin.line;
    const std::string where = file + ":" + std::to_string(line);
    const KeySpec* spec = find_spec(key);
    if (!spec && node.is_table()) {
      load_table(node.as_table(), key, file);
      continue;
    }
    if (!spec) throw ConfigError(where + ": " + unknown_key_message(key));
    ConfigValue v;
    const std::string err = convert(node, spec->type, v);
    if (!err.empty()) throw ConfigError(where + ": " + key + ": " + err);
    values_[key] = std::move(v);
    sources_[key] = where;
  }
}

Config Config::from_string(const std::string& text, const std::string& name) {
  Config c;
  c.path_ = name;
  toml::table tbl;
  try {
    tbl = toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    throw ConfigError(name + ":" + std::to_string(e.source().begin.line) + ":" +
                      std::to_string(e.source().begin.column) + ": " +
                      std::string(e.description()));
  }
  c.load_table(&tbl, "", name);
  return c;
}

Config Config::from_file(const std::string& path) {
  std::ifstream f(path);
  if (!f.good()) throw ConfigError(path + ": cannot open config file");
  std::stringstream ss;
  ss << f.rdbuf();
  return from_string(ss.str(), path);
}

void Config::set_overrides(const std::vector<std::string>& assignments) {
  for (const std::string& a : assignments) set_override(a);
}

void Config::set_override(const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos) throw ConfigError("--set " + assignment + ": expected key=value");
  auto trim = [](std::string s) {
    const auto b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
  };
  const std::string key = trim(assignment.substr(0, eq));
  const std::string text = trim(assignment.substr(eq + 1));
  const std::string where = "--set " + key;
  const KeySpec* spec = find_spec(key);
  if (!spec) throw ConfigError(where + ": " + unknown_key_message(key));
  ConfigValue v;
  std::string err;
  try {
    toml::table t = toml::parse("v = " + text);
    err = convert(*t.get("v"), spec->type, v);
  } catch (const toml::parse_error& e) {
    // A bare word is a convenience for strings: --set solver.lr.lr_policy=cosine.
    // It must be text TOML can hold, or the resolved config.toml would not read back.
    if (spec->type == VT::string && text_problem(text).empty())
      v = text;
    else if (spec->type == VT::string)
      err = "the value holds " + text_problem(text) +
            " (a config string is UTF-8 text; control characters need a quoted TOML string"
            " with escapes, such as \"a\\tb\")";
    else
      err = std::string("cannot parse '") + text + "' as TOML (" + std::string(e.description()) +
            "); expected " + expected_name(spec->type);
  }
  if (!err.empty()) throw ConfigError(where + ": " + err);
  values_[key] = std::move(v);
  sources_[key] = "--set";
  settings_.reset();
}

void Config::set(const std::string& key, ConfigValue value, const std::string& source) {
  const KeySpec* spec = find_spec(key);
  if (!spec) throw ConfigError(unknown_key_message(key));
  if (spec->type == VT::floating && std::holds_alternative<int64_t>(value))
    value = static_cast<double>(std::get<int64_t>(value));
  if (!type_matches(value, spec->type))
    throw ConfigError(key + ": expected " + expected_name(spec->type));
  values_[key] = std::move(value);
  sources_[key] = source;
  settings_.reset();
}

const ConfigValue& Config::get(const std::string& key) const {
  const auto it = values_.find(key);
  if (it == values_.end()) throw ConfigError(unknown_key_message(key));
  return it->second;
}

std::string Config::source(const std::string& key) const {
  get(key);
  return sources_.at(key);
}

template <typename T>
static const T& get_as(const Config& c, const std::string& key) {
  const ConfigValue& v = c.get(key);
  if (!std::holds_alternative<T>(v))
    throw ConfigError(key + ": is a " + value_type_name(find_spec(key)->type) + " key");
  return std::get<T>(v);
}

bool Config::get_bool(const std::string& key) const {
  return get_as<bool>(*this, key);
}
int64_t Config::get_int(const std::string& key) const {
  return get_as<int64_t>(*this, key);
}
double Config::get_double(const std::string& key) const {
  const ConfigValue& v = get(key);
  if (std::holds_alternative<int64_t>(v)) return static_cast<double>(std::get<int64_t>(v));
  return get_as<double>(*this, key);
}
const std::string& Config::get_string(const std::string& key) const {
  return get_as<std::string>(*this, key);
}
std::vector<double> Config::get_doubles(const std::string& key) const {
  return get_as<Doubles>(*this, key);
}
std::vector<int64_t> Config::get_ints(const std::string& key) const {
  return get_as<Ints>(*this, key);
}
std::vector<std::string> Config::get_strings(const std::string& key) const {
  return get_as<std::vector<std::string>>(*this, key);
}
std::vector<std::vector<double>> Config::get_float_lists(const std::string& key) const {
  return get_as<std::vector<Doubles>>(*this, key);
}

void ConfigChecks::choice(const std::string& key, const std::vector<std::string>& valid) const {
  const std::string& v = cfg_.get_string(key);
  if (std::find(valid.begin(), valid.end(), v) == valid.end())
    fail(key, "unknown value '" + v + "' (valid: " + join(valid) + ")");
}

void ConfigChecks::at_least(const std::string& key, int64_t lo) const {
  if (cfg_.get_int(key) < lo)
    fail(key, "must be " +
                  std::string(lo == 0   ? ">= 0"
                              : lo == 1 ? "positive"
                                        : ">= " + std::to_string(lo)) +
                  ", got " + std::to_string(cfg_.get_int(key)));
}

void ConfigChecks::positive(const std::string& key) const {
  const double v = cfg_.get_double(key);
  if (!(v > 0) || !std::isfinite(v)) fail(key, "must be positive, got " + format_double(v));
}

void ConfigChecks::non_negative(const std::string& key) const {
  const double v = cfg_.get_double(key);
  if (!(v >= 0) || !std::isfinite(v)) fail(key, "must be >= 0, got " + format_double(v));
}

void ConfigChecks::in_unit(const std::string& key) const {
  const double v = cfg_.get_double(key);
  if (!(v >= 0 && v < 1)) fail(key, "must be in [0, 1), got " + format_double(v));
}

void ConfigChecks::probability(const std::string& key) const {
  const double v = cfg_.get_double(key);
  if (!(v >= 0 && v <= 1)) fail(key, "must be a probability in [0, 1], got " + format_double(v));
}

void ConfigChecks::required(const std::string& key, const std::string& why) const {
  if (cfg_.get_string(key).empty()) fail(key, "must be set " + why);
}

void ConfigChecks::range_pair(const std::string& key, double lo, double hi) const {
  const auto v = cfg_.get_doubles(key);
  if (v.size() != 2 || !(v[0] >= lo) || !(v[0] <= v[1]) || !(v[1] <= hi))
    fail(key, "expected [low, high] with " + format_double(lo) +
                  " <= low <= high <= " + format_double(hi) + ", got " + format_value(v));
}

namespace {

// The common keys, parsed and checked: each choice is checked here once and
// becomes its enum.
Settings parse_settings(const Config& c) {
  const ConfigChecks check(c);
  Settings st;
  // The task first: every other key is read as the task reads it.
  const std::vector<std::string> tasks = schema_task_names();
  if (tasks.empty())
    c.fail("task",
           "no task is registered; call tcv::train::register_builtin_tasks() (train/task.h) "
           "before reading configs");
  check.choice("task", tasks);
  st.task = c.get_string("task");
  for (const auto& spec : config_schema()) {
    if (spec.tasks.empty() || !c.is_set(spec.key) ||
        std::find(spec.tasks.begin(), spec.tasks.end(), st.task) != spec.tasks.end())
      continue;
    c.fail(spec.key, "the key belongs to task" + std::string(spec.tasks.size() > 1 ? "s " : " ") +
                         tasks_text(spec.tasks) + "; this config has task = \"" + st.task + "\"");
  }

  // A string key of `valid` values, as the index of its value.
  const auto pick = [&](const std::string& key, const std::vector<std::string>& valid) {
    check.choice(key, valid);
    return static_cast<size_t>(std::find(valid.begin(), valid.end(), c.get_string(key)) -
                               valid.begin());
  };

  check.at_least("seed", 0);
  st.seed = static_cast<uint64_t>(c.get_int("seed"));
  st.device = static_cast<DeviceChoice>(pick("device", {"cpu", "cuda", "auto"}));
  auto& tr = st.train;
  tr.amp = static_cast<AmpMode>(pick("train.amp", {"off", "bf16", "f16"}));
  tr.conv_algo = static_cast<ConvAlgo>(pick("train.conv_algo", {"auto", "direct", "winograd"}));
  tr.conv_algo_set = c.is_set("train.conv_algo");
  auto& d = st.data;
  check.at_least("data.num_classes", 1);
  check.at_least("data.workers", 0);
  check.at_least("data.max_pixels", 1);
  d.dataset = c.get_string("data.dataset");
  d.data_dir = c.get_string("data.data_dir");
  d.skip_corrupt = c.get_bool("data.skip_corrupt");
  d.max_pixels = c.get_int("data.max_pixels");
  d.num_classes = c.get_int("data.num_classes");
  d.workers = c.get_int("data.workers");
  if (d.workers > kMaxWorkers)
    c.fail("data.workers", "must be at most " + std::to_string(kMaxWorkers) + ", got " +
                               std::to_string(d.workers) +
                               " (threads that assemble batches; about one per core is plenty)");
  check.positive("data.normalize.div_value");
  d.normalize.div_value = c.get_double("data.normalize.div_value");
  d.normalize.mean = c.get_doubles("data.normalize.mean");
  if (d.normalize.mean.empty()) c.fail("data.normalize.mean", "must not be empty");
  d.normalize.std = c.get_doubles("data.normalize.std");
  if (d.normalize.std.empty()) c.fail("data.normalize.std", "must not be empty");
  for (double s : d.normalize.std)
    if (!(s > 0)) c.fail("data.normalize.std", "values must be positive, got " + format_double(s));
  check.at_least("train.batch_size", 1);
  tr.batch_size = c.get_int("train.batch_size");
  tr.drop_last = c.get_bool("train.drop_last");
  check.at_least("val.batch_size", 1);
  check.at_least("val.max_images", 0);
  st.val.batch_size = c.get_int("val.batch_size");
  st.val.max_images = c.get_int("val.max_images");

  auto& n = st.network;
  n.model_name = c.get_string("network.model_name");
  if (n.model_name.empty()) c.fail("network.model_name", "must not be empty");
  n.bucket_cap_mb = c.get_double("network.bucket_cap_mb");
  if (!(n.bucket_cap_mb > 0)) c.fail("network.bucket_cap_mb", "must be > 0");
  check.choice("network.comm_hook", dist::comm_hook_names());
  n.comm_hook = c.get_string("network.comm_hook");
  n.bucket_plan = static_cast<BucketPlanChoice>(pick("network.bucket_plan", {"timed", "cap"}));
  check.at_least("network.powersgd.rank", 1);
  check.at_least("network.powersgd.start_iter", 0);
  check.positive("network.powersgd.min_compression_rate");
  auto& ps = n.powersgd;
  ps.matrix_approximation_rank = c.get_int("network.powersgd.rank");
  ps.start_powerSGD_iter = c.get_int("network.powersgd.start_iter");
  ps.min_compression_rate = c.get_double("network.powersgd.min_compression_rate");
  ps.use_error_feedback = c.get_bool("network.powersgd.error_feedback");
  ps.warm_start = c.get_bool("network.powersgd.warm_start");
  if (n.comm_hook == "powersgd" && ps.start_powerSGD_iter <= 1 &&
      (ps.use_error_feedback || ps.warm_start))
    c.fail("network.powersgd.start_iter",
           "must be > 1 when network.powersgd.error_feedback or network.powersgd.warm_start is "
           "true (as PyTorch's PowerSGDState: DDP rebuilds its buckets after the first step), "
           "got " +
               std::to_string(ps.start_powerSGD_iter));
  n.timeout = c.get_double("network.timeout");
  if (!(n.timeout >= 0.001 && n.timeout < 1e9))
    c.fail("network.timeout", "must be in [0.001, 1e9) seconds, got " + format_double(n.timeout));
  n.wait_log_interval = c.get_double("network.wait_log_interval");
  if (!(n.wait_log_interval >= 0 && n.wait_log_interval < 1e9))
    c.fail("network.wait_log_interval",
           "must be in [0, 1e9) seconds, got " + format_double(n.wait_log_interval));
  n.distributed = c.get_bool("network.distributed");
  n.sync_bn = c.get_bool("network.sync_bn");
  n.find_unused_parameters = c.get_bool("network.find_unused_parameters");
  n.resume = c.get_string("network.resume");
  n.pretrained = c.get_string("network.pretrained");

  auto& so = st.solver;
  check.at_least("solver.max_epoch", 1);
  check.at_least("solver.max_iters", 0);
  for (const char* key : {"solver.max_epoch", "solver.max_iters"})
    if (c.get_int(key) > kMaxIterations)
      c.fail(key, "must be at most " + std::to_string(kMaxIterations) + " (2^40), got " +
                      std::to_string(c.get_int(key)));
  so.max_epoch = c.get_int("solver.max_epoch");
  so.max_iters = c.get_int("solver.max_iters");
  check.at_least("solver.display_iter", 1);
  check.at_least("solver.test_interval", 0);
  check.at_least("solver.save_epoch", 0);
  check.at_least("solver.save_iters", 0);
  so.display_iter = c.get_int("solver.display_iter");
  so.test_interval = c.get_int("solver.test_interval");
  so.save_epoch = c.get_int("solver.save_epoch");
  so.save_iters = c.get_int("solver.save_iters");
  auto& lr = so.lr;
  check.positive("solver.lr.base_lr");
  lr.base_lr = c.get_double("solver.lr.base_lr");
  check.choice("solver.lr.lr_policy",
               {"fixed", "step", "multistep", "cosine", "lambda_poly", "poly"});
  lr.lr_policy = parse_lr_policy(c.get_string("solver.lr.lr_policy"));
  lr.per_epoch = pick("solver.lr.metric", {"epoch", "iters"}) == 0;
  check.positive("solver.lr.step.gamma");
  check.at_least("solver.lr.step.step_size", 1);
  check.positive("solver.lr.multistep.gamma");
  lr.step_gamma = c.get_double("solver.lr.step.gamma");
  lr.step_size = c.get_int("solver.lr.step.step_size");
  lr.multistep_gamma = c.get_double("solver.lr.multistep.gamma");
  lr.stepvalue = c.get_ints("solver.lr.multistep.stepvalue");
  const auto& steps = lr.stepvalue;
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i] <= 0 || (i > 0 && steps[i] <= steps[i - 1]))
      c.fail("solver.lr.multistep.stepvalue", "must be positive and increasing");
  if (lr.lr_policy == LrPolicyKind::multistep && steps.empty())
    c.fail("solver.lr.multistep.stepvalue", "must not be empty with lr_policy \"multistep\"");
  check.non_negative("solver.lr.lambda_poly.power");
  lr.poly_power = c.get_double("solver.lr.lambda_poly.power");
  check.at_least("solver.lr.warm.warm_iters", 0);
  check.at_least("solver.lr.warm.warm_epochs", 0);
  lr.is_warm = c.get_bool("solver.lr.is_warm");
  lr.warm_iters = c.get_int("solver.lr.warm.warm_iters");
  lr.warm_epochs = c.get_int("solver.lr.warm.warm_epochs");
  if (lr.is_warm && lr.warm_iters == 0 && lr.warm_epochs == 0)
    c.fail("solver.lr.warm.warm_iters",
           "must be positive when solver.lr.is_warm is true (or set solver.lr.warm.warm_epochs)");
  check.non_negative("solver.clip_grad_norm");
  so.clip_grad_norm = c.get_double("solver.clip_grad_norm");
  so.nonfinite = static_cast<NonFinite>(pick("solver.nonfinite", {"stop", "skip"}));
  auto& op = so.optim;
  op.method = static_cast<OptimMethod>(pick("solver.optim.optim_method", {"sgd", "adam", "adamw"}));
  op.nodecay_bn_bias = c.get_bool("solver.optim.nodecay_bn_bias");
  check.in_unit("solver.optim.sgd.momentum");
  check.non_negative("solver.optim.sgd.weight_decay");
  op.sgd_momentum = c.get_double("solver.optim.sgd.momentum");
  op.sgd_weight_decay = c.get_double("solver.optim.sgd.weight_decay");
  op.sgd_nesterov = c.get_bool("solver.optim.sgd.nesterov");
  if (op.sgd_nesterov && !(op.sgd_momentum > 0))
    c.fail("solver.optim.sgd.nesterov", "needs solver.optim.sgd.momentum > 0");
  for (const std::string opt : {"adam", "adamw"}) {
    const std::string key = "solver.optim." + opt + ".betas";
    const auto betas = c.get_doubles(key);
    if (betas.size() != 2) c.fail(key, "expected 2 values, got " + std::to_string(betas.size()));
    for (double b : betas)
      if (!(b >= 0 && b < 1)) c.fail(key, "must be in [0, 1), got " + format_double(b));
    check.positive("solver.optim." + opt + ".eps");
    check.non_negative("solver.optim." + opt + ".weight_decay");
    AdamConfig& a = opt == "adam" ? op.adam : op.adamw;
    a.beta1 = betas[0];
    a.beta2 = betas[1];
    a.eps = c.get_double("solver.optim." + opt + ".eps");
    a.weight_decay = c.get_double("solver.optim." + opt + ".weight_decay");
  }
  check.at_least("checkpoints.keep_last", 0);
  st.keep_last = c.get_int("checkpoints.keep_last");
  return st;
}

// Guards the Configs' parsed settings: a Config read by several threads parses once.
std::mutex& settings_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

const Settings& Config::settings() const {
  const std::lock_guard<std::mutex> lock(settings_mutex());
  if (!settings_) settings_ = std::make_shared<const Settings>(parse_settings(*this));
  return *settings_;
}

void Config::validate() const {
  const std::string& task = settings().task;
  for (const TaskSchema& t : task_storage())
    if (t.name == task && t.validate) t.validate(*this);
}

std::string Config::to_toml() const {
  // Group keys by their table, tables in the order they first appear in the schema.
  std::vector<std::string> tables;
  std::map<std::string, std::vector<const KeySpec*>> by_table;
  const std::string& task = get_string("task");
  for (const auto& s : config_schema()) {
    if (!s.tasks.empty() && std::find(s.tasks.begin(), s.tasks.end(), task) == s.tasks.end())
      continue;
    const auto p = s.key.rfind('.');
    const std::string t = p == std::string::npos ? "" : s.key.substr(0, p);
    if (!by_table.count(t)) tables.push_back(t);
    by_table[t].push_back(&s);
  }
  std::ostringstream os;
  os << "# Resolved tcv-train config" << (path_.empty() ? "" : " (from " + path_ + ")") << "\n";
  for (const auto& t : tables) {
    if (!t.empty()) os << "\n[" << t << "]\n";
    for (const KeySpec* s : by_table[t]) {
      os << last_part(s->key) << " = " << format_value(values_.at(s->key));
      if (!s->help.empty()) os << "  # " << s->help;
      os << "\n";
    }
  }
  return os.str();
}

}  // namespace tcv::train
