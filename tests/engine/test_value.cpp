// tcv::Value, the installed API's JSON value: literals, checked accessors,
// order, copies, and the same text as engine/json.h writes.
#include "engine/value.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "engine/error.h"
#include "engine/json.h"
#include "support/error_of.h"
#include "support/run_files.h"

namespace tcv {
namespace {

using testing::contains;
using testing::error_of;

TEST(Value, LiteralsKeepTheirTypesAndTheKeysTheirOrder) {
  const Value v = Value::object({{"z", 1},
                                 {"a", 2.5},
                                 {"s", "text"},
                                 {"b", true},
                                 {"n", nullptr},
                                 {"list", Value::array({1, "x", Value::object({{"k", 0}})})}});
  EXPECT_EQ(v.type(), Value::Type::object);
  EXPECT_EQ(v.size(), 6u);
  EXPECT_EQ(v.members()[0].first, "z");
  EXPECT_EQ(v.members()[1].first, "a");
  EXPECT_TRUE(v.at("z").is_integer());
  EXPECT_EQ(v.at("z").as_int(), 1);
  EXPECT_EQ(v.at("z").as_double(), 1.0);
  EXPECT_FALSE(v.at("a").is_integer());
  EXPECT_TRUE(v.at("a").is_number());
  EXPECT_EQ(v.at("a").as_double(), 2.5);
  EXPECT_EQ(v.at("s").as_string(), "text");
  EXPECT_TRUE(v.at("b").as_bool());
  EXPECT_TRUE(v.at("n").is_null());
  EXPECT_EQ(v.at("list").size(), 3u);
  EXPECT_EQ(v.at("list")[1].as_string(), "x");
  EXPECT_EQ(v.at("list")[2].at("k").as_int(), 0);
  EXPECT_EQ(v.dump(), R"({"z":1,"a":2.5,"s":"text","b":true,"n":null,"list":[1,"x",{"k":0}]})");
}

TEST(Value, WritesWhatJsonDumpWritesAndReadsItBack) {
  Value row = Value::object();
  row["map"] = 0.1 + 0.2;  // not a short decimal: every digit must survive
  row["images"] = int64_t{1} << 53;
  row["nan"] = std::nan("");
  row["inf"] = std::numeric_limits<double>::infinity();
  row["name"] = std::string("caf\xc3\xa9");
  row["classes"] = Value::object({{"cat", 0.5}, {"dog", nullptr}});
  const Json j = to_json(row);
  EXPECT_EQ(row.dump(), json_dump(j));
  EXPECT_EQ(row.dump(2), json_dump(j, 2));
  const Value back = Value::parse(row.dump());
  EXPECT_EQ(back.at("map").as_double(), 0.1 + 0.2);
  EXPECT_EQ(back.at("images").as_int(), int64_t{1} << 53);
  EXPECT_TRUE(back.at("nan").is_null());  // JSON has no NaN
  EXPECT_EQ(back.at("name").as_string(), "caf\xc3\xa9");
  EXPECT_EQ(to_value(j).dump(), row.dump());
  // Unsigned integers beyond int64 become numbers.
  EXPECT_FALSE(to_value(Json(uint64_t{1} << 63)).is_integer());
  EXPECT_EQ(to_value(Json(uint64_t{1} << 63)).as_double(), 9223372036854775808.0);
}

TEST(Value, AccessorsNameWhatWasAskedAndWhatWasFound) {
  const Value v = Value::object({{"map", "high"}, {"ap", 0.5}});
  EXPECT_TRUE(contains(error_of([&] { (void)v.at("map").as_double(); }),
                       "[value] expected a number, got string"));
  EXPECT_TRUE(contains(error_of([&] { (void)v.at("miou"); }),
                       "[value] no member \"miou\" (members: \"map\", \"ap\")"));
  EXPECT_TRUE(contains(error_of([&] { (void)v.at("ap").as_int(); }),
                       "[value] expected an integer, got 0.5"));
  EXPECT_EQ(Value(3.0).as_int(), 3);
  EXPECT_TRUE(contains(error_of([&] { (void)Value(1e300).as_int(); }), "expected an integer"));
  const Value a = Value::array({1, 2});
  EXPECT_TRUE(
      contains(error_of([&] { (void)a[2]; }), "[value] index 2 is out of range for an array of 2"));
  EXPECT_TRUE(contains(error_of([&] { (void)a.at("x"); }), "a member of array, not of an object"));
  EXPECT_TRUE(contains(error_of([] { (void)Value::parse("{\"a\": 1, \"a\": 2}"); }), "\"a\""));
  EXPECT_TRUE(contains(error_of([] { (void)Value::parse("[1,"); }), "line 1"));
}

TEST(Value, CopiesOwnTheirMembersAndAMovedFromValueIsNull) {
  Value a = Value::object({{"list", Value::array({1})}});
  Value b = a;
  b["list"].push_back(2);
  b["new"] = 1;
  EXPECT_EQ(a.at("list").size(), 1u);
  EXPECT_FALSE(a.contains("new"));
  EXPECT_EQ(b.at("list").size(), 2u);
  Value c = std::move(b);
  EXPECT_TRUE(b.is_null());  // NOLINT(bugprone-use-after-move): documented
  EXPECT_EQ(c.at("list")[1].as_int(), 2);
  // Assigning a key twice keeps one member, in its first place.
  c["list"] = "replaced";
  EXPECT_EQ(c.members()[0].first, "list");
  EXPECT_EQ(c.size(), 2u);
}

TEST(Value, NullBecomesAnObjectOrAnArrayWhenUsedAsOne) {
  Value o;
  o["k"] = 1;
  EXPECT_TRUE(o.is_object());
  Value a;
  a.push_back("x");
  EXPECT_TRUE(a.is_array());
  EXPECT_EQ(a[0].as_string(), "x");
  // Integer indices of any type pick the element, not a key.
  const int64_t i = 0;
  const size_t z = 0;
  EXPECT_EQ(a[i].as_string(), "x");
  EXPECT_EQ(a[z].as_string(), "x");
  EXPECT_EQ(Value(1), Value(1.0));
  EXPECT_NE(Value(1), Value("1"));
  EXPECT_EQ(Value::object({{"a", 1}}), Value::parse("{\"a\": 1.0}"));
}

}  // namespace
}  // namespace tcv
