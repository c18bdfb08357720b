#include "train/report.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "engine/error.h"
#include "engine/serialize.h"

namespace tcv::train {

namespace {

// Escapes text content (never used inside attribute values).
std::string html_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

std::string num(double v, int digits = 4) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
  return buf;
}

void put_u32(std::string& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out += static_cast<char>((v >> s) & 0xff);
}

void put_chunk(std::string& out, const char* type, const std::string& data) {
  put_u32(out, static_cast<uint32_t>(data.size()));
  const std::string body = std::string(type, 4) + data;
  out += body;
  put_u32(out, static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(body.data()),
                                           static_cast<uInt>(body.size()))));
}

struct Series {
  std::string name;
  std::string color;
  std::vector<double> x, y;
};

// A line chart as inline SVG: axes with min/max labels, one polyline per series.
std::string svg_chart(const std::string& title, const std::vector<Series>& series,
                      const std::string& xlabel) {
  const double W = 440, H = 240, L = 56, R = 12, T = 26, B = 34;
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& s : series)
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i])) continue;
      x0 = std::min(x0, s.x[i]), x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, s.y[i]), y1 = std::max(y1, s.y[i]);
    }
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" viewBox=\"0 0 " << W << " " << H << "\" class=\"chart\">"
    << "<text x=\"" << W / 2 << "\" y=\"16\" text-anchor=\"middle\" class=\"t\">"
    << html_escape(title) << "</text>";
  if (!std::isfinite(x0)) {
    o << "<text x=\"" << W / 2 << "\" y=\"" << H / 2
      << "\" text-anchor=\"middle\">no data yet</text>"
      << "</svg>";
    return o.str();
  }
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) {
    const double pad = y0 == 0 ? 1 : std::abs(y0) * 0.05;
    y0 -= pad, y1 += pad;
  }
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); };
  o << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << W - L - R << "\" height=\""
    << H - T - B << "\" fill=\"none\" stroke=\"#999\"/>";
  o << "<text x=\"" << L - 4 << "\" y=\"" << T + 4 << "\" text-anchor=\"end\">" << num(y1)
    << "</text><text x=\"" << L - 4 << "\" y=\"" << H - B << "\" text-anchor=\"end\">" << num(y0)
    << "</text><text x=\"" << L << "\" y=\"" << H - B + 14 << "\">" << num(x0, 6)
    << "</text><text x=\"" << W - R << "\" y=\"" << H - B + 14 << "\" text-anchor=\"end\">"
    << num(x1, 6) << "</text><text x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 6
    << "\" text-anchor=\"middle\">" << html_escape(xlabel) << "</text>";
  double legend_x = L + 6;
  for (const auto& s : series) {
    o << "<polyline fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"1.5\" points=\"";
    for (size_t i = 0; i < s.x.size(); ++i)
      if (std::isfinite(s.y[i])) o << num(px(s.x[i]), 6) << "," << num(py(s.y[i]), 6) << " ";
    o << "\"/>";
    if (s.x.size() == 1)
      o << "<circle cx=\"" << num(px(s.x[0]), 6) << "\" cy=\"" << num(py(s.y[0]), 6)
        << "\" r=\"2.5\" fill=\"" << s.color << "\"/>";
    o << "<text x=\"" << legend_x << "\" y=\"" << T + 14 << "\" fill=\"" << s.color << "\">"
      << html_escape(s.name) << "</text>";
    legend_x += 10 + 7 * static_cast<double>(s.name.size());
  }
  o << "</svg>";
  return o.str();
}

Series series_of(const std::vector<Value>& metrics, const std::string& split,
                 const std::string& key, const std::string& name, const std::string& color) {
  Series s{name, color, {}, {}};
  for (const Value& j : metrics) {
    if (!j.is_object()) continue;
    const Value* sp = j.find("split");
    const Value* v = j.find(key);
    const Value* it = j.find("iter");
    if (!sp || !v || !it || !sp->is_string() || sp->as_string() != split || !v->is_number() ||
        !it->is_number())
      continue;
    s.x.push_back(it->as_double());
    s.y.push_back(v->as_double());
  }
  return s;
}

std::string label_of(const std::vector<std::string>& names, int64_t c) {
  return c >= 0 && c < static_cast<int64_t>(names.size()) ? names[c] : std::to_string(c);
}

}  // namespace

std::string base64_encode(const std::string& bytes) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string o;
  o.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = static_cast<uint8_t>(bytes[i]) << 16 |
                       static_cast<uint8_t>(bytes[i + 1]) << 8 | static_cast<uint8_t>(bytes[i + 2]);
    o += k[v >> 18], o += k[(v >> 12) & 63], o += k[(v >> 6) & 63], o += k[v & 63];
  }
  if (i < bytes.size()) {
    uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    o += k[v >> 18], o += k[(v >> 12) & 63];
    o += i + 1 < bytes.size() ? k[(v >> 6) & 63] : '=';
    o += '=';
  }
  return o;
}

std::string encode_png(const uint8_t* chw, int64_t channels, int64_t height, int64_t width) {
  TCV_CHECK(channels == 1 || channels == 3, "[encode_png] expects 1 or 3 channels, got ", channels);
  TCV_CHECK(height > 0 && width > 0, "[encode_png] empty image (", height, " x ", width, ")");
  // Rows of filter type 0 (none) followed by interleaved pixels.
  std::string raw;
  raw.reserve(static_cast<size_t>(height * (1 + width * channels)));
  const int64_t plane = height * width;
  for (int64_t y = 0; y < height; ++y) {
    raw += '\0';
    for (int64_t x = 0; x < width; ++x)
      for (int64_t c = 0; c < channels; ++c)
        raw += static_cast<char>(chw[c * plane + y * width + x]);
  }
  uLongf zlen = compressBound(static_cast<uLong>(raw.size()));
  std::string z(zlen, '\0');
  TCV_CHECK(compress2(reinterpret_cast<Bytef*>(z.data()), &zlen,
                      reinterpret_cast<const Bytef*>(raw.data()), static_cast<uLong>(raw.size()),
                      Z_BEST_COMPRESSION) == Z_OK,
            "[encode_png] zlib compress2 failed");
  z.resize(zlen);

  std::string png("\x89PNG\r\n\x1a\n", 8);
  std::string ihdr;
  put_u32(ihdr, static_cast<uint32_t>(width));
  put_u32(ihdr, static_cast<uint32_t>(height));
  ihdr += static_cast<char>(8);                      // bit depth
  ihdr += static_cast<char>(channels == 1 ? 0 : 2);  // gray | RGB
  ihdr += std::string(3, '\0');                      // deflate, adaptive filters, no interlace
  put_chunk(png, "IHDR", ihdr);
  put_chunk(png, "IDAT", z);
  put_chunk(png, "IEND", "");
  return png;
}

std::vector<Value> read_jsonl(const std::string& path) {
  std::vector<Value> out;
  std::ifstream f(path);
  std::string line;
  int64_t n = 0;
  while (std::getline(f, line)) {
    ++n;
    if (line.empty()) continue;
    try {
      out.push_back(Value::parse(line));
    } catch (const std::exception& e) {
      TCV_THROW(path, ":", n, ": ", e.what());
    }
  }
  return out;
}

std::string render_report(const ReportInputs& in) {
  const auto& m = in.metrics;
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    << "<title>" << html_escape(in.title) << "</title><style>"
    << "body{font-family:sans-serif;margin:16px;color:#222}"
    << "svg.chart{border:1px solid #ddd;margin:4px;font-size:11px}"
    << "text.t{font-size:13px;font-weight:bold}"
    << ".grid{display:flex;flex-wrap:wrap}"
    << "figure{margin:4px;text-align:center;font-size:11px;width:104px}"
    << "figure img{width:96px;height:96px;image-rendering:pixelated}"
    << ".ok{color:#1a7f37}.bad{color:#c0392b}"
    << "div.fig{margin:6px;border:1px solid #ddd;padding:4px;font-size:11px}"
    << "div.pics{display:flex}figure.pic{width:auto;margin:2px}"
    << "figure.pic img{width:auto;height:auto;max-width:320px;image-rendering:auto}"
    << "div.fig p{margin:2px;max-width:644px}"
    << "pre{background:#f6f6f6;padding:8px;font-size:12px}"
    << "</style></head><body>\n<h1>" << html_escape(in.title) << "</h1>\n";

  // Latest numbers.
  const Value* last_val = nullptr;
  const Value* last_train = nullptr;
  for (const Value& j : m) {
    const Value* sp = j.is_object() ? j.find("split") : nullptr;
    if (sp && sp->is_string()) (sp->as_string() == "val" ? last_val : last_train) = &j;
  }
  o << "<p>";
  if (last_train && last_train->contains("iter"))
    o << "iteration " << last_train->at("iter").dump() << "; ";
  std::string lead;
  for (const auto& h : in.headline) {
    if (!last_val) break;
    const Value* v = last_val->find(h.key);
    if (!v || !v->is_number()) continue;
    lead += (lead.empty() ? "validation " : ", ") + html_escape(h.label) + " " +
            num(v->as_double(), 4) + html_escape(h.unit);
  }
  o << lead << "</p>\n<h2>Curves</h2>\n<div class=\"grid\">\n";
  o << svg_chart("loss",
                 {series_of(m, "train", "loss", "train", "#1f77b4"),
                  series_of(m, "val", "loss", "val", "#d62728")},
                 "iteration")
    << "\n";
  o << svg_chart("learning rate", {series_of(m, "train", "lr", "lr", "#2ca02c")}, "iteration")
    << "\n";
  o << svg_chart("training images/s",
                 {series_of(m, "train", "images_per_sec", "images/s", "#9467bd")}, "iteration")
    << "\n";
  static const char* kColors[] = {"#d62728", "#ff7f0e", "#2ca02c", "#1f77b4", "#9467bd"};
  for (const auto& chart : in.val_charts) {
    std::vector<Series> series;
    for (size_t i = 0; i < chart.series.size(); ++i)
      series.push_back(series_of(m, "val", chart.series[i].first, chart.series[i].second,
                                 kColors[i % std::size(kColors)]));
    o << svg_chart(chart.title, series, "iteration") << "\n";
  }
  o << "</div>\n";

  if (!in.figures.empty()) {
    o << "<h2>" << html_escape(in.figures_title) << "</h2>\n<div class=\"grid\">\n";
    for (const auto& f : in.figures) {
      o << "<div class=\"fig\"><div class=\"pics\">";
      for (size_t i = 0; i < f.pictures.size(); ++i) {
        const ReportPicture& p = f.pictures[i];
        const std::string png = encode_png(p.pixels.data(), p.channels, p.height, p.width);
        o << "<figure class=\"pic\"><img alt=\"sample\" src=\"data:image/png;base64,"
          << base64_encode(png) << "\">";
        if (i < f.labels.size()) o << "<figcaption>" << html_escape(f.labels[i]) << "</figcaption>";
        o << "</figure>";
      }
      o << "</div><p>" << html_escape(f.caption) << "</p></div>\n";
    }
    o << "</div>\n";
  }

  if (!in.samples.empty() || in.figures.empty())
    o << "<h2>Validation samples</h2>\n<div class=\"grid\">\n";
  for (const auto& s : in.samples) {
    const std::string png = encode_png(s.pixels.data(), s.channels, s.height, s.width);
    const bool ok = s.pred == s.label;
    o << "<figure><img alt=\"sample\" src=\"data:image/png;base64," << base64_encode(png)
      << "\"><figcaption class=\"" << (ok ? "ok" : "bad")
      << "\">pred: " << html_escape(label_of(in.class_names, s.pred))
      << "<br>true: " << html_escape(label_of(in.class_names, s.label))
      << "</figcaption></figure>\n";
  }
  if (!in.samples.empty() || in.figures.empty()) o << "</div>\n";
  o << "<h2>Config</h2>\n<pre>" << html_escape(in.config_toml) << "</pre>\n</body></html>\n";
  return o.str();
}

void write_report(const std::string& path, const ReportInputs& in) {
  write_file_atomic(path, render_report(in));
}

}  // namespace tcv::train
