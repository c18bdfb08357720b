#include "dist/env.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "engine/error.h"

namespace tcv::dist {

namespace {

constexpr const char* kNames[] = {"RANK",
                                  "LOCAL_RANK",
                                  "WORLD_SIZE",
                                  "LOCAL_WORLD_SIZE",
                                  "MASTER_ADDR",
                                  "MASTER_PORT",
                                  "SLURM_PROCID",
                                  "SLURM_NTASKS",
                                  "SLURM_LOCALID",
                                  "SLURM_JOB_ID",
                                  "SLURM_STEP_NODELIST",
                                  "SLURM_JOB_NODELIST",
                                  "SLURM_NODELIST",
                                  "TCV_STORE_PREFIX",
                                  "TCV_GLOO_HOSTNAME",
                                  "GLOO_SOCKET_IFNAME",
                                  "NCCL_SOCKET_IFNAME",
                                  "TCV_DIST_TIMEOUT",
                                  "TCV_DIST_WAIT_LOG_INTERVAL"};

const std::string& require(const EnvMap& env, const char* name) {
  auto it = env.find(name);
  TCV_CHECK(it != env.end(), "[dist env] ", name,
            " is not set; env:// rendezvous needs RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT "
            "(set by torchrun or tcv-run)");
  return it->second;
}

// Strict decimal: optional '-', digits only, the whole string, within int range.
int parse_int(const char* name, const std::string& value) {
  int64_t v = 0;
  const char* first = value.data();
  const char* last = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(first, last, v);
  TCV_CHECK(!value.empty() && ec == std::errc() && ptr == last &&
                v >= std::numeric_limits<int>::min() && v <= std::numeric_limits<int>::max(),
            "[dist env] ", name, "='", value, "' is not a decimal integer");
  return static_cast<int>(v);
}

int parse_port(const char* name, const std::string& value) {
  const int port = parse_int(name, value);
  TCV_CHECK(port >= 1 && port <= 65535, "[dist env] ", name, "='", value,
            "' must be in [1, 65535]");
  return port;
}

const std::string* find(const EnvMap& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

// One name of a host list, "prefix[ranges]mid[ranges]suffix", expanded into
// `out` (at most `max_hosts` names in all).
// With first_only, only the first name (the ranges are still checked).
void expand_name(const std::string& name, const std::string& what, size_t max_hosts,
                 std::vector<std::string>& out, bool first_only = false) {
  std::vector<std::string> parts = {""};
  size_t i = 0;
  auto bad = [&](const std::string& why) {
    TCV_THROW("[dist env] ", what, ": malformed host list entry '", name, "': ", why);
  };
  while (i < name.size()) {
    if (name[i] == ']') bad("']' without '['");
    if (name[i] != '[') {
      const size_t next = name.find_first_of("[]", i);
      const std::string text = name.substr(i, next - i);
      for (auto& p : parts) p += text;
      i = next == std::string::npos ? name.size() : next;
      continue;
    }
    const size_t close = name.find(']', i);
    if (close == std::string::npos) bad("'[' without ']'");
    const std::string ranges = name.substr(i + 1, close - i - 1);
    if (ranges.empty()) bad("empty brackets");
    std::vector<std::string> values;
    size_t start = 0;
    while (start <= ranges.size()) {
      const size_t comma = ranges.find(',', start);
      const std::string r =
          ranges.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      const size_t dash = r.find('-');
      const std::string lo_s = r.substr(0, dash);
      const std::string hi_s = dash == std::string::npos ? lo_s : r.substr(dash + 1);
      auto number = [&](const std::string& s) {
        uint64_t v = 0;
        auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (s.empty() || ec != std::errc() || p != s.data() + s.size() || v > 1000000000)
          bad("'" + r + "' is not a number or a range lo-hi");
        return v;
      };
      const uint64_t lo = number(lo_s), hi = number(hi_s);
      if (hi < lo) bad("range '" + r + "' goes down");
      const uint64_t last = first_only ? lo : hi;
      if (!first_only && (hi - lo + 1) * parts.size() + out.size() > max_hosts)
        bad("more than " + std::to_string(max_hosts) + " hosts");
      const size_t width = lo_s.size();
      for (uint64_t v = lo; v <= last && !(first_only && !values.empty()); ++v) {
        std::string s = std::to_string(v);
        if (s.size() < width) s.insert(0, width - s.size(), '0');
        values.push_back(std::move(s));
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (values.size() * parts.size() + out.size() > max_hosts)
      bad("more than " + std::to_string(max_hosts) + " hosts");
    std::vector<std::string> grown;
    grown.reserve(parts.size() * values.size());
    for (const auto& p : parts)
      for (const auto& v : values) grown.push_back(p + v);
    parts = std::move(grown);
    i = close + 1;
  }
  for (auto& p : parts) out.push_back(std::move(p));
}

// The top-level entries of a host list: commas outside brackets separate them.
std::vector<std::string> split_hostlist(const std::string& list, const std::string& what) {
  std::vector<std::string> names;
  std::string cur;
  int depth = 0;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    TCV_CHECK(depth == 0 || depth == 1, "[dist env] ", what, ": malformed host list '", list,
              "' (unbalanced or nested brackets)");
    if (c == ',' && depth == 0) {
      names.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  TCV_CHECK(depth == 0, "[dist env] ", what, ": malformed host list '", list,
            "' ('[' without ']')");
  names.push_back(cur);
  for (const auto& n : names)
    TCV_CHECK(!n.empty(), "[dist env] ", what, ": malformed host list '", list, "' (empty name)");
  return names;
}

}  // namespace

DistEnv parse_dist_env(const EnvMap& env) {
  DistEnv d;
  const std::string& world = require(env, "WORLD_SIZE");
  d.world_size = parse_int("WORLD_SIZE", world);
  TCV_CHECK(d.world_size >= 1, "[dist env] WORLD_SIZE='", world, "' must be at least 1");

  const std::string& rank = require(env, "RANK");
  d.rank = parse_int("RANK", rank);
  TCV_CHECK(d.rank >= 0 && d.rank < d.world_size, "[dist env] RANK='", rank,
            "' must be in [0, WORLD_SIZE=", d.world_size, ")");

  auto local = env.find("LOCAL_RANK");
  if (local == env.end()) {
    d.local_rank = d.rank;
  } else {
    d.local_rank = parse_int("LOCAL_RANK", local->second);
    TCV_CHECK(d.local_rank >= 0 && d.local_rank < d.world_size, "[dist env] LOCAL_RANK='",
              local->second, "' must be in [0, WORLD_SIZE=", d.world_size, ")");
  }

  d.master_addr = require(env, "MASTER_ADDR");
  TCV_CHECK(!d.master_addr.empty(), "[dist env] MASTER_ADDR is set but empty");
  d.master_port = parse_port("MASTER_PORT", require(env, "MASTER_PORT"));
  d.source = DistSource::env;
  if (auto p = env.find("TCV_STORE_PREFIX"); p != env.end()) {
    TCV_CHECK(!p->second.empty(), "[dist env] TCV_STORE_PREFIX is set but empty");
    d.store_prefix = p->second;
  }
  return d;
}

std::vector<std::string> expand_hostlist(const std::string& list, const std::string& what,
                                         size_t max_hosts) {
  std::vector<std::string> out;
  for (const auto& name : split_hostlist(list, what)) expand_name(name, what, max_hosts, out);
  return out;
}

std::string first_host(const std::string& list, const std::string& what) {
  std::vector<std::string> out;
  expand_name(split_hostlist(list, what)[0], what, 1, out, /*first_only=*/true);
  return out[0];
}

int slurm_default_port(const EnvMap& env) {
  const std::string* job = find(env, "SLURM_JOB_ID");
  if (!job || job->empty()) return 29500;
  uint64_t id = 0;
  auto [p, ec] = std::from_chars(job->data(), job->data() + job->size(), id);
  if (ec != std::errc() || p != job->data() + job->size()) return 29500;
  return 15000 + static_cast<int>(id % 10000);
}

bool has_slurm_env(const EnvMap& env) {
  return env.count("SLURM_PROCID") != 0 && env.count("SLURM_NTASKS") != 0;
}

DistEnv parse_slurm_env(const EnvMap& env) {
  auto need = [&](const char* name) -> const std::string& {
    const std::string* v = find(env, name);
    TCV_CHECK(v != nullptr, "[dist env] ", name,
              " is not set; a Slurm launch (srun) sets SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID "
              "and SLURM_JOB_NODELIST");
    return *v;
  };
  DistEnv d;
  d.source = DistSource::slurm;
  const std::string& ntasks = need("SLURM_NTASKS");
  d.world_size = parse_int("SLURM_NTASKS", ntasks);
  TCV_CHECK(d.world_size >= 1, "[dist env] SLURM_NTASKS='", ntasks, "' must be at least 1");
  const std::string& procid = need("SLURM_PROCID");
  d.rank = parse_int("SLURM_PROCID", procid);
  TCV_CHECK(d.rank >= 0 && d.rank < d.world_size, "[dist env] SLURM_PROCID='", procid,
            "' must be in [0, SLURM_NTASKS=", d.world_size, ")");
  if (const std::string* local = find(env, "SLURM_LOCALID")) {
    d.local_rank = parse_int("SLURM_LOCALID", *local);
    TCV_CHECK(d.local_rank >= 0 && d.local_rank < d.world_size, "[dist env] SLURM_LOCALID='",
              *local, "' must be in [0, SLURM_NTASKS=", d.world_size, ")");
  } else {
    d.local_rank = d.rank;
  }
  if (const std::string* addr = find(env, "MASTER_ADDR")) {
    TCV_CHECK(!addr->empty(), "[dist env] MASTER_ADDR is set but empty");
    d.master_addr = *addr;
  } else {
    const char* list_name = nullptr;
    for (const char* n : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"})
      if (find(env, n)) {
        list_name = n;
        break;
      }
    TCV_CHECK(list_name != nullptr,
              "[dist env] under Slurm, MASTER_ADDR or SLURM_JOB_NODELIST must be set (the "
              "first node of the list hosts rank 0's store)");
    d.master_addr = first_host(*find(env, list_name), list_name);
  }
  const std::string* port = find(env, "MASTER_PORT");
  d.master_port = port ? parse_port("MASTER_PORT", *port) : slurm_default_port(env);
  return d;
}

DistEnv resolve_dist_env(const EnvMap& env) {
  if (env.count("WORLD_SIZE") || !has_slurm_env(env)) return parse_dist_env(env);
  return parse_slurm_env(env);
}

EnvMap process_dist_env() {
  EnvMap env;
  for (const char* name : kNames)
    if (const char* v = std::getenv(name)) env[name] = v;
  return env;
}

DistEnv read_dist_env() {
  return resolve_dist_env(process_dist_env());
}

bool has_dist_env(const EnvMap& env) {
  return env.count("WORLD_SIZE") != 0 || has_slurm_env(env);
}

std::chrono::milliseconds seconds_to_ms(double seconds, const std::string& what, bool allow_zero) {
  TCV_CHECK(std::isfinite(seconds) && (allow_zero ? seconds >= 0 : seconds > 0) && seconds < 1e9,
            what, " must be ", allow_zero ? "at least 0" : "positive", " seconds (below 1e9), got ",
            seconds);
  const auto ms = static_cast<int64_t>(std::llround(seconds * 1000.0));
  TCV_CHECK(allow_zero || ms > 0, what, " must be at least 0.001 seconds, got ", seconds);
  return std::chrono::milliseconds(ms);
}

DistTimeouts timeouts_from_env(const EnvMap& env, DistTimeouts t) {
  auto read = [&](const char* name, bool allow_zero, std::chrono::milliseconds& out) {
    const std::string* v = find(env, name);
    if (!v) return;
    double s = 0;
    auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), s);
    TCV_CHECK(!v->empty() && ec == std::errc() && p == v->data() + v->size(), "[dist env] ", name,
              "='", *v, "' is not a number of seconds");
    out = seconds_to_ms(s, std::string("[dist env] ") + name, allow_zero);
  };
  read("TCV_DIST_TIMEOUT", false, t.timeout);
  read("TCV_DIST_WAIT_LOG_INTERVAL", true, t.wait_log_interval);
  return t;
}

int threads_per_local_process(const EnvMap& env, int cpus) {
  cpus = std::max(cpus, 1);
  const std::string* local = find(env, "LOCAL_WORLD_SIZE");
  if (!local) return cpus;
  const int n = parse_int("LOCAL_WORLD_SIZE", *local);
  TCV_CHECK(n >= 1, "[dist env] LOCAL_WORLD_SIZE='", *local, "' must be at least 1");
  return std::max(1, cpus / n);
}

}  // namespace tcv::dist
