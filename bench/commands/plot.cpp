// Plots of the benchmarks' figures with gnuplot, and `bench pipeline --from`'s plot of an earlier run.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include "plot.hpp"
#include "resident/detail/files.hpp"
#include "resident/resident.hpp"
#include "table.hpp"

namespace resident::cli {

namespace {
// A string as a gnuplot single-quoted string: '' stands for ', and control characters (a newline would
// end the command and start another, from a title read out of a --from file) become spaces.
std::string gnuplot_quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') q += "''";
    else if ((unsigned char)c < 0x20 || c == 0x7f) q += ' ';
    else q += c;
  }
  return q + "'";
}
}  // namespace

void plot_png(const std::string& path, const std::string& title, const std::string& xlabel,
              const std::string& ylabel, const std::vector<plot_series>& series, bool logx) {
  if (!detail::program_found("gnuplot"))
    throw invalid_argument("--plot needs gnuplot, which is not installed: install gnuplot-nox "
                           "(scripts/setup.sh does), or write --json and plot that elsewhere");
  const bool drawable = std::any_of(series.begin(), series.end(), [&](const plot_series& s) {
    for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i]) && (!logx || s.x[i] > 0)) return true;
    return false;
  });
  if (!drawable)
    throw invalid_argument("--plot: nothing to draw into '" + path + "': no row holds a point (an empty run, or "
                           "sizes of 0); give the --json of a run that measured something");
  // The data, the script, the image and gnuplot's messages live in a private folder, removed on every
  // path out: gnuplot's complaints belong in the error, not in the report, and the image is copied over
  // the path only once drawn (a failed plot leaves no empty PNG, and keeps an earlier one).
  const detail::private_dir work("resident-plot");
  const std::string data = work.file("plot.dat"), script = work.file("plot.gp"), image = work.file("plot.png");
  std::ostringstream f;
  for (auto& s : series) {
    f << "# " << gnuplot_quoted(s.name) << "\n";
    for (std::size_t i = 0; i < s.x.size(); ++i) f << s.x[i] << " " << s.y[i] << "\n";
    f << "\n\n";
  }
  std::ostringstream g;
  g << "set terminal pngcairo size 900,540 font ',11' noenhanced\nset output " << gnuplot_quoted(image) << "\n"
    << "set title " << gnuplot_quoted(title) << "\nset xlabel " << gnuplot_quoted(xlabel) << "\nset ylabel "
    << gnuplot_quoted(ylabel) << "\nset grid\nset key outside right\nset logscale y\n"
    << (logx ? "set logscale x 2\nset format x '2^%L'\n" : "") << "plot ";
  for (std::size_t i = 0; i < series.size(); ++i)
    g << (i ? ", " : "") << gnuplot_quoted(data) << " index " << i << " with linespoints lw 2 title "
      << gnuplot_quoted(series[i].name);
  g << "\n";
  detail::write_file_atomically(data, f.str(), detail::file_access::secret);
  detail::write_file_atomically(script, g.str(), detail::file_access::secret);
  const detail::program_result r = detail::run_program({"gnuplot", "-d", script});  // -d: no start-up file (a ~/.gnuplot is code)
  std::string why;
  const auto png = r.status == 0 ? detail::read_regular_file(image, std::size_t(1) << 30, &why) : std::nullopt;
  if (!png || png->empty())
    throw invalid_argument("--plot: gnuplot failed to draw '" + path + "'; it said:\n" +
                           (r.status < 0 ? std::string("(gnuplot could not be started)") : r.output));
  if (std::string w = detail::try_write_file_atomically(path, *png); !w.empty())
    throw invalid_argument("--plot: cannot write '" + path + "': " + w);
  out() << "plot written to " << path << "\n";
}

std::string json_problem(const nlohmann::json::exception& e) {
  if (const auto* p = dynamic_cast<const nlohmann::json::parse_error*>(&e))
    return "it is not JSON from byte " + std::to_string(p->byte);  // the bytes there may not be printable
  std::string what = e.what();  // "[json.exception.type_error.302] type must be ...": the reader's words
  if (const auto close = what.find("] "); what.rfind("[json.exception", 0) == 0 && close != std::string::npos)
    what = what.substr(close + 2);
  if (e.id == 403 && what.rfind("key ", 0) == 0)  // "key 'rows' not found"
    return "it has no field " + what.substr(4, what.find(" not found") - 4);
  if (e.id == 306 || e.id == 305) return "it holds another kind of JSON value where an object was expected";
  if (dynamic_cast<const nlohmann::json::type_error*>(&e)) return "a field holds another kind of value: " + what;
  return what;
}

nlohmann::json read_json(const std::string& path) {
  std::string why;
  const std::optional<std::string> text = detail::read_regular_file(path, std::size_t(256) << 20, &why);
  if (!text) throw invalid_argument("cannot read JSON from '" + path + "': " + why);
  try {
    return nlohmann::json::parse(*text);
  } catch (const nlohmann::json::exception& e) {
    throw invalid_argument("cannot read '" + path + "': " + json_problem(e) +
                           "; give a file written by the benchmark's --json");
  }
}

// Adds the peers' time-over-memcpy series per system.
void add_peer_series(const std::string& path, std::vector<plot_series>& series) try {
  if (path.empty()) return;
  nlohmann::json p = read_json(path);
  std::vector<std::string> order;
  for (auto& r : p.at("rows")) {
    std::string name = r.at("system");
    if (std::find(order.begin(), order.end(), name) == order.end()) order.push_back(name);
  }
  for (auto& name : order) {
    plot_series s{name, {}, {}};
    for (auto& r : p.at("rows"))
      if (r.at("system") == name) {
        s.x.push_back(std::ldexp(1.0, r.at("log2_n").get<int>()));
        s.y.push_back(r.at("over_memcpy").get<double>());
      }
    series.push_back(s);
  }
} catch (const nlohmann::json::exception& e) {
  throw invalid_argument("--peers: '" + path + "' is not the --json output of bench/peers/peers.py (" + json_problem(e) + ")");
}

namespace {
// A row's log2_n: the exponent, a whole number from 0 to 62 (older files: the text "2^14").
int log2_n_of(const nlohmann::json& l, const std::string& from) {
  std::string text = l.is_string() ? l.get<std::string>() : l.dump();
  std::string digits = l.is_string() && text.rfind("2^", 0) == 0 ? text.substr(2) : l.is_number_integer() ? text : "";
  int v = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || v < 0 || v > 62)
    throw invalid_argument("--from: '" + from + "' has a row whose log2_n is " + text +
                           ": expected a whole number from 0 to 62 (or the text 2^N); is it the --json output of "
                           "`resident bench pipeline`?");
  return v;
}

}  // namespace

int plot_pipeline_from(const bench_options& o) try {
  nlohmann::json j = read_json(o.from);
  if (j.value("benchmark", "") != "pipeline")
    throw invalid_argument("'" + o.from + "' is not the --json output of `resident bench pipeline`");
  plot_series fused_s{"resident fused", {}, {}}, three_s{"resident, three kernels", {}, {}};
  for (auto& r : j.at("rows")) {
    const double n = std::ldexp(1.0, log2_n_of(r.at("log2_n"), o.from));
    fused_s.x.push_back(n);
    fused_s.y.push_back(r.at("fused_over_memcpy").get<double>());
    three_s.x.push_back(n);
    three_s.y.push_back(r.at("three_kernels_ms").get<double>() / r.at("memcpy_ms").get<double>());
  }
  std::vector<plot_series> series{fused_s, three_s};
  add_peer_series(o.peers, series);
  plot_png(o.plot, "seed pipeline, time / device-to-device memcpy (" + j.value("device_name", std::string("?")) + ")",
           "elements (float32)", "time / memcpy time of the same bytes (lower is better)", series, true);
  return 0;
} catch (const nlohmann::json::exception& e) {
  throw invalid_argument("--from: '" + o.from + "' is not the --json output of `resident bench pipeline` (" +
                         json_problem(e) + ")");
}

}  // namespace resident::cli
