// docs/extending.md against the code: the walkthrough of adding a task names
// files to copy from, new files, registration points and mechanisms; each must
// be what the code has, so the page cannot drift from the registries.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/gradcheck.h"

namespace {

namespace fs = std::filesystem;
using Row = std::vector<std::string>;

std::string root() {
  return tcv::testing::source_dir() + "/";
}

std::string read(const std::string& path) {
  std::ifstream f(root() + path);
  EXPECT_TRUE(f.good()) << path;
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A cell's first `code` span, or the cell itself.
std::string code_of(const std::string& cell) {
  const auto a = cell.find('`');
  const auto b = a == std::string::npos ? a : cell.find('`', a + 1);
  if (b == std::string::npos) return cell;
  return cell.substr(a + 1, b - a - 1);
}

// The rows of the first table under "## <heading>", header and rule left out.
std::vector<Row> table_under(const std::string& doc, const std::string& heading) {
  const auto at = doc.find("\n## " + heading + "\n");
  EXPECT_NE(at, std::string::npos) << heading;
  std::vector<Row> rows;
  if (at == std::string::npos) return rows;
  std::istringstream in(doc.substr(at + heading.size() + 5));
  std::string line;
  bool in_table = false;
  int seen = 0;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) break;
    if (line.rfind("|", 0) != 0) {
      if (in_table) break;
      continue;
    }
    in_table = true;
    if (++seen <= 2) continue;  // the header and its rule
    Row row;
    std::string cell;
    std::istringstream cells(line.substr(1));
    while (std::getline(cells, cell, '|')) row.push_back(code_of(cell));
    rows.push_back(row);
  }
  return rows;
}

// The body of `void <fn> {` ... "\n}" in `text`, one line an element.
std::vector<std::string> body_of(const std::string& text, const std::string& fn) {
  const auto at = text.find("void " + fn + " {");
  EXPECT_NE(at, std::string::npos) << fn;
  std::vector<std::string> lines;
  if (at == std::string::npos) return lines;
  std::istringstream in(text.substr(at, text.find("\n}\n", at) - at));
  std::string line;
  std::getline(in, line);  // the signature
  while (std::getline(in, line)) {
    const auto first = line.find_first_not_of(' ');
    if (first != std::string::npos) lines.push_back(line.substr(first));
  }
  return lines;
}

// A line with every identifier replaced: "det::register_ssd_models();" and
// "inst::register_mask_rcnn_models();" have the same shape.
std::string shape(const std::string& line) {
  return std::regex_replace(line, std::regex("[A-Za-z_][A-Za-z_0-9]*"), "x");
}

bool contains_word(const std::string& text, const std::string& word) {
  return std::regex_search(text, std::regex("\\b" + word + "\\b"));
}

const std::string& doc() {
  static const std::string d = read("docs/extending.md");
  return d;
}

TEST(Extending, MechanismsAreTheOnesDetectionUses) {
  const auto rows = table_under(doc(), "The mechanisms");
  ASSERT_GE(rows.size(), 5u);
  for (const Row& r : rows) {
    ASSERT_GE(r.size(), 3u);
    EXPECT_TRUE(contains_word(read(r[1]), r[0])) << r[0] << " is not declared in " << r[1];
    EXPECT_TRUE(contains_word(read(r[2]), r[0])) << r[0] << " is not used in " << r[2];
  }
}

TEST(Extending, NewFilesAreNewAndTheirModelsExist) {
  const auto rows = table_under(doc(), "New files");
  ASSERT_GE(rows.size(), 10u);
  std::map<std::string, int> kinds;
  for (const Row& r : rows) {
    ASSERT_GE(r.size(), 3u);
    EXPECT_FALSE(fs::exists(root() + r[0])) << r[0] << " exists: the page describes a task to add";
    EXPECT_TRUE(fs::exists(root() + r[1])) << r[1] << ", the model of " << r[0] << ", is gone";
    EXPECT_EQ(fs::path(r[0]).extension(), fs::path(r[1]).extension()) << r[0];
    ++kinds[r[0].substr(0, r[0].find('/'))];
  }
  // A model family, a data set, an evaluator, a task, a config, their tests.
  for (const char* top : {"models", "data", "train", "configs", "tests"})
    EXPECT_GE(kinds[top], 1) << "no new file under " << top << "/";
}

TEST(Extending, RegistrationPointsTakeOneLinePerFamily) {
  const auto rows = table_under(doc(), "Lines added elsewhere");
  ASSERT_GE(rows.size(), 2u);
  int calls = 0;
  for (const Row& r : rows) {
    ASSERT_GE(r.size(), 4u);
    const std::string text = read(r[0]);
    const std::string& added = r[2];
    const std::string& detection = r[3];
    EXPECT_EQ(shape(added), shape(detection)) << added << " is not written as " << detection;
    EXPECT_EQ(text.find(added), std::string::npos) << added << " is in " << r[0] << " already";
    if (r[1] == "#include") {
      EXPECT_NE(text.find("\n" + detection + "\n"), std::string::npos) << r[0] << ": " << detection;
      continue;
    }
    ++calls;
    // The function is a list of one-line registrations, one per family.
    const std::string fn = r[1].substr(0, r[1].find('('));
    const std::vector<std::string> body = body_of(text, r[1]);
    int family_lines = 0;
    bool has_detection = false;
    for (const std::string& line : body) {
      family_lines += shape(line) == shape(detection);
      has_detection |= line == detection;
    }
    EXPECT_TRUE(has_detection) << r[0] << " " << fn << " lacks " << detection;
    EXPECT_GE(family_lines, 4) << r[0] << " " << fn << ": not one line per family";
    EXPECT_LE(static_cast<int>(body.size()), family_lines + 6)
        << r[0] << " " << fn << " does more than call one line per family";
  }
  EXPECT_EQ(calls, 2);  // the model registry and the task registry
}

// The task registry's own file is where the page says a task is added; the
// config code knows no task (its schema hears of them from register_task).
TEST(Extending, ConfigCodeIncludesNoTask) {
  const std::string config = read("train/config.cpp");
  EXPECT_EQ(config.find("#include \"train/task.h\""), std::string::npos);
  EXPECT_EQ(config.find("#include \"train/tasks/"), std::string::npos);
  EXPECT_EQ(read("train/tasks/cls.cpp").find("#include \"train/trainer.h\""), std::string::npos);
}

}  // namespace
