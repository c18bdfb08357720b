// The op table's driver: every op's cases (support/op_cases.h) through the f64
// gradient check and the comparisons (the CPU against the exact result; CUDA
// against the CPU where a GPU is present), one test per op, one summary line
// per op; and the check that every function of tcv::ops has cases.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "support/op_cases.h"

namespace tcv::testing {
namespace {

struct OpSummary {
  std::string op;
  int cases = 0;
  int64_t gradchecked = 0;
  int exact = 0;  // CPU against the exact result
  int cuda = 0;   // CUDA against the CPU
  int cuda_skipped = 0;
  double worst = 0;  // largest |error| / bound
};

std::vector<OpSummary>& summaries() {
  static std::vector<OpSummary> s;
  return s;
}

void print(const OpSummary& s) {
  std::printf(
      "[op table] %-34s %4d cases %6lld elements gradient-checked  %4d vs exact  "
      "%4d cuda vs cpu (%d skipped)  worst error/bound %.3g\n",
      s.op.c_str(), s.cases, static_cast<long long>(s.gradchecked), s.exact, s.cuda, s.cuda_skipped,
      s.worst);
  std::fflush(stdout);
}

// Run in one process (the binary without a filter), the table ends with every
// op's line and the totals.
class SummaryPrinter : public ::testing::Environment {
 public:
  void TearDown() override {
    if (summaries().size() < 2) return;
    OpSummary total{.op = "total (" + std::to_string(summaries().size()) + " ops)"};
    std::printf("\n");
    for (const OpSummary& s : summaries()) {
      print(s);
      total.cases += s.cases;
      total.gradchecked += s.gradchecked;
      total.exact += s.exact;
      total.cuda += s.cuda;
      total.cuda_skipped += s.cuda_skipped;
      total.worst = std::max(total.worst, s.worst);
    }
    print(total);
  }
};
[[maybe_unused]] const auto* const kPrinter =
    ::testing::AddGlobalTestEnvironment(new SummaryPrinter);

class OpTable : public ::testing::TestWithParam<std::string> {};

TEST_P(OpTable, Cases) {
  OpSummary s{.op = GetParam()};
  // TCV_OP_TABLE_TIMES=1 prints each case's time, to find the slow ones.
  const bool times = std::getenv("TCV_OP_TABLE_TIMES") != nullptr;
  for (const OpCase* c : op_registry().cases_of(s.op)) {
    SCOPED_TRACE(c->id());
    const auto start = std::chrono::steady_clock::now();
    ++s.cases;
    if (c->check == Check::gradient_and_parity) s.gradchecked += gradcheck_case(*c);
    for (const DType dt : c->dtypes) {
      SCOPED_TRACE(dtype_name(dt));
      const ParityResult r = parity_case(*c, dt);
      s.exact += r.exact_checked;
      s.cuda += r.other_checked;
      s.cuda_skipped += !r.other_checked;
      s.worst = std::max({s.worst, r.worst, r.worst_other});
    }
    if (times)
      std::printf(
          "[op table] %8.1f ms  %s\n",
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count(),
          c->id().c_str());
  }
  print(s);
  summaries().push_back(s);
}

INSTANTIATE_TEST_SUITE_P(Ops, OpTable, ::testing::ValuesIn(op_registry().ops()),
                         [](const auto& info) { return info.param; });

// ---------------------------------------------------------------- coverage

/// The functions declared in namespace tcv::ops by engine/ops.h and the
/// headers it includes, each with the header that declares it. The headers
/// are read at run time, so the list is the declarations themselves: nothing
/// generated to go stale, and an op declared in a header ops.h includes is
/// found the moment it is written.
std::map<std::string, std::string> declared_ops() {
  std::map<std::string, std::string> ops;
  const std::string root = source_dir() + "/";
  std::ifstream top(root + "engine/ops.h");
  EXPECT_TRUE(top.good()) << "cannot read " << root << "engine/ops.h";
  std::string line;
  std::vector<std::string> headers;
  const std::regex include_re("#include \"(engine/ops/[a-z_]+\\.h)\"");
  std::smatch m;
  while (std::getline(top, line))
    if (std::regex_search(line, m, include_re)) headers.push_back(m[1]);
  for (const std::string& h : headers) {
    std::ifstream in(root + h);
    EXPECT_TRUE(in.good()) << "cannot read " << root << h;
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    // Comments out; then only what lies directly in `namespace tcv::ops { ... }`.
    text = std::regex_replace(text, std::regex("//[^\n]*"), "");
    text = std::regex_replace(text, std::regex("/\\*[\\s\\S]*?\\*/"), "");
    size_t pos = 0;
    const std::string open = "namespace tcv::ops {";
    while ((pos = text.find(open, pos)) != std::string::npos) {
      pos += open.size();
      int depth = 0, parens = 0;
      std::string statement;
      for (; pos < text.size(); ++pos) {
        const char ch = text[pos];
        if (ch == '}' && depth == 0) break;  // the namespace ends
        if (ch == '{') ++depth;
        if (ch == '}') {
          --depth;
          if (depth == 0) statement.clear();  // a struct or enum body
          continue;
        }
        if (depth > 0) continue;
        if (ch == '(' && parens++ == 0) {
          // A declaration's name: the identifier before its first '('.
          static const std::regex decl_re("([A-Za-z_][A-Za-z0-9_]*)\\s*$");
          const bool type =
              std::regex_search(statement, std::regex("^\\s*(struct|enum|class|using)\\b"));
          if (!type && std::regex_search(statement, m, decl_re) &&
              statement.find('=') == std::string::npos)
            ops.emplace(m[1], h);
        }
        if (ch == ')') --parens;
        if (ch == ';' && parens == 0) {
          statement.clear();
          continue;
        }
        if (parens == 0) statement += ch;
      }
    }
  }
  return ops;
}

TEST(OpTableCoverage, EveryOpHasCases) {
  const std::map<std::string, std::string> declared = declared_ops();
  // The parser must see the ops it is known to: a broken one cannot pass.
  for (const char* known : {"add", "conv2d", "batch_norm", "cross_entropy", "topk", "matmul"})
    ASSERT_TRUE(declared.count(known)) << "the header parser missed tcv::ops::" << known;
  const OpRegistry& reg = op_registry();
  const std::vector<std::string> with_cases = reg.ops();
  const std::set<std::string> covered(with_cases.begin(), with_cases.end());
  std::string missing;
  for (const auto& [op, header] : declared)
    if (!covered.count(op) && !reg.exemptions().count(op))
      missing += "\n  tcv::ops::" + op + " (" + header + ")";
  EXPECT_TRUE(missing.empty())
      << "these functions of tcv::ops have no cases in the op table:" << missing
      << "\nDeclare their cases in tests/ops/cases_<family>.cpp (see the comment at the top of "
         "tests/support/op_cases.h), or, for a pure view or helper whose parts are checked "
         "elsewhere, an exemption with its reason in tests/ops/cases.cpp.";
  for (const std::string& op : with_cases)
    EXPECT_TRUE(declared.count(op))
        << "the op table has cases for " << op << ", which engine/ops/*.h does not declare";
  for (const auto& [op, why] : reg.exemptions()) {
    EXPECT_TRUE(declared.count(op)) << "exemption for " << op << ", which is not an op";
    EXPECT_FALSE(covered.count(op)) << op << " is exempt and has cases: drop the exemption";
    EXPECT_FALSE(why.empty()) << "the exemption of " << op << " gives no reason";
  }
}

TEST(OpTableCoverage, EveryCaseIsWellFormed) {
  for (const OpCase& c : op_registry().cases()) {
    SCOPED_TRACE(c.id());
    EXPECT_FALSE(c.name.empty());
    EXPECT_FALSE(c.dtypes.empty()) << "a case compares in at least one dtype";
    for (const Input& in : c.inputs)
      if (in.value.defined()) {
        EXPECT_FALSE(in.value.requires_grad()) << "fixed values do not require grad";
        if (in.layout.kind != Layout::Kind::contiguous) {
          EXPECT_EQ(in.layout.view(in.value, in.shape).shape(), in.shape) << in.layout.str();
        }
      }
  }
}

}  // namespace
}  // namespace tcv::testing
