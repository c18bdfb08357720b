// tcv's JSON front end over nlohmann-json: the strict reader (errors with a
// place, repeated keys, nesting), key order, the checked accessors and the
// writer's exact bytes for metrics lines and safetensors headers.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <string>

#include "engine/json.h"
#include "kernels/base.h"

namespace tcv {
namespace {

std::string error_of(std::string_view text) {
  try {
    (void)json_parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Json, ParsesEveryTypeAndKeepsKeyOrder) {
  const Json j = json_parse(
      R"( {"z": 1, "b": -2.5e3, "c": "x\"y\\z\n\u00e9\ud83d\ude00", "d": [true, false, null],
          "e": {}, "f": [], "g": 12345678901234, "a": -7} )");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.size(), 8u);
  EXPECT_EQ(json_int(j, "z"), 1);
  EXPECT_DOUBLE_EQ(json_double(j, "b"), -2500.0);
  EXPECT_EQ(json_string(j, "c"), "x\"y\\z\n\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(j.at("d")[0], true);
  EXPECT_TRUE(j.at("d")[2].is_null());
  EXPECT_EQ(json_int(j, "g"), 12345678901234);
  EXPECT_EQ(json_int(j, "a"), -7);
  std::string keys;
  for (const auto& [k, v] : j.items()) keys += k;
  EXPECT_EQ(keys, "zbcdefga");  // file order, not sorted
  EXPECT_EQ(json_parse(json_dump(j)), j);
  EXPECT_EQ(json_parse(json_dump(j, 2)), j);
  EXPECT_EQ(json_dump(json_parse(R"({"x": [1, 2]})")), R"({"x":[1,2]})");
}

TEST(Json, WritesMetricsLinesByteForByte) {
  // The exact bytes metrics.jsonl and the trainer state have always had.
  Json j = Json::object();
  j["split"] = "train";
  j["epoch"] = int64_t{3};
  j["loss"] = 0.25;
  j["lr"] = 1e-5;
  j["name"] = "fmnist\tcnn";
  j["ok"] = true;
  j["tags"] = Json::array({"a", 2, 2.0});
  j["nan"] = std::nan("");
  j["inf"] = -INFINITY;
  EXPECT_EQ(
      json_dump(j),
      R"({"split":"train","epoch":3,"loss":0.25,"lr":1e-05,"name":"fmnist\tcnn","ok":true,"tags":["a",2,2.0],"nan":null,"inf":null})");
  EXPECT_EQ(json_dump(j, 2).substr(0, 32), "{\n  \"split\": \"train\",\n  \"epoch\":");
  // Doubles read back to the same bits.
  const double v = 0.1 + 0.2;
  EXPECT_EQ(json_parse(json_dump(Json(v))).get<double>(), v);
  // A safetensors header entry.
  Json e = Json::object();
  e["dtype"] = "F32";
  e["shape"] = Json::array({2, 3});
  e["data_offsets"] = Json::array({uint64_t{0}, uint64_t{24}});
  EXPECT_EQ(json_dump(e), R"({"dtype":"F32","shape":[2,3],"data_offsets":[0,24]})");
}

TEST(Json, WriterReplacesBytesThatAreNotUtf8) {
  // A file name that is not UTF-8 must not make tcv-predict --json throw.
  EXPECT_EQ(json_dump(Json("a\xff"
                           "b")),
            "\"a\xef\xbf\xbd"
            "b\"");
}

TEST(Json, RejectsMalformedInputWithItsPlace) {
  const char* bad[] = {"",        "{",      "{\"a\" 1}", "[1,]",    "[1 2]",       "01",
                       "1.",      "-",      "tru",       "\"abc",   "\"\\x\"",     "{\"a\":1}x",
                       "{1: 2}",  "\"\t\"", "nul",       "[1e]",    "\"\\ud800\"", "\"\xff\"",
                       "[1] [2]", "NaN",    "1e400",     "// c\n1", "{\"a\":1,}"};
  for (const char* s : bad) {
    const std::string msg = error_of(s);
    EXPECT_NE(msg.find("[json] "), std::string::npos) << "accepted or wrong error: " << s;
    EXPECT_NE(msg.find(" at line "), std::string::npos) << msg;
  }
  EXPECT_NE(error_of("{\n  \"a\": [1, 2,, 3]\n}").find("line 2, column 14"), std::string::npos)
      << error_of("{\n  \"a\": [1, 2,, 3]\n}");
  EXPECT_NE(error_of("[1,\n 1e400]").find("number overflow parsing '1e400' at line 2"),
            std::string::npos)
      << error_of("[1,\n 1e400]");
}

TEST(Json, RejectsRepeatedKeysNamingTheKey) {
  // Which of two equal keys wins differs between readers: refuse both.
  const std::string msg = error_of("{\"a\": 1,\n \"b\": {\"x\": 1, \"x\": 2}}");
  EXPECT_NE(msg.find("duplicate key \"x\" at line 2"), std::string::npos) << msg;
  // The same key in different objects is fine.
  EXPECT_NO_THROW((void)json_parse(R"({"x": {"x": 1}, "y": {"x": 2}})"));
}

TEST(Json, BoundsNestingInsteadOfOverflowingTheStack) {
  EXPECT_NE(error_of(std::string(100000, '[')).find("nesting deeper than 512"), std::string::npos);
  EXPECT_NE(error_of(std::string(600, '[') + std::string(600, ']')).find("nesting"),
            std::string::npos);
  EXPECT_NO_THROW((void)json_parse(std::string(500, '[') + std::string(500, ']')));
}

TEST(Json, ManyKeysParseInLinearTime) {
  // nlohmann's ordered_map searches its keys linearly on insert; a header with
  // 200k keys would take minutes that way.
  std::string text = "{";
  for (int i = 0; i < 200000; ++i)
    text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
  text += "}";
  const auto t0 = std::chrono::steady_clock::now();
  const Json j = json_parse(text);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(j.size(), 200000u);
  EXPECT_EQ(j.begin().key(), "k0");
  EXPECT_LT(s, 20.0);  // quadratic would be ~2e10 string compares
}

TEST(Json, CheckedAccessorsNameTheKeyAndTypes) {
  const Json j = json_parse(
      R"({"s": "x", "f": 1.5, "i": 3, "e": 1e3, "big": 18446744073709551615, "b": true})");
  auto err = [&](auto fn) -> std::string {
    try {
      fn();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(err([&] { (void)json_int(j, "s"); }).find("\"s\": expected an integer, got string"),
            std::string::npos);
  EXPECT_NE(err([&] { (void)json_int(j, "f"); }).find("\"f\": expected an integer, got 1.5"),
            std::string::npos);
  EXPECT_NE(err([&] { (void)json_int(j, "big"); }).find("out of range"), std::string::npos);
  EXPECT_NE(err([&] { (void)json_string(j, "i"); }).find("\"i\": expected a string, got integer"),
            std::string::npos);
  EXPECT_NE(err([&] { (void)json_double(j, "s"); }).find("expected a number, got string"),
            std::string::npos);
  EXPECT_NE(err([&] { (void)json_bool(j, "i"); }).find("expected a bool"), std::string::npos);
  EXPECT_NE(
      err([&] { (void)json_at(j, "zz"); }).find("missing key \"zz\" (keys: s, f, i, e, big, b)"),
      std::string::npos);
  EXPECT_NE(err([&] { (void)json_at(j.at("s"), "k"); }).find("expected an object"),
            std::string::npos);
  EXPECT_EQ(json_int(j, "i"), 3);
  EXPECT_EQ(json_int(j, "e"), 1000);  // a whole number written as a float
  EXPECT_DOUBLE_EQ(json_double(j, "i"), 3.0);
  EXPECT_TRUE(json_bool(j, "b"));
  EXPECT_EQ(json_string(j, "s"), "x");
}

}  // namespace
}  // namespace tcv
