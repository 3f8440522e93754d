#pragma once
// Plots of the benchmarks' figures (gnuplot), shared by the benchmarks that draw.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench.hpp"

namespace resident::cli {

/// One line of a plot: its name and points.
struct plot_series {
  std::string name;
  std::vector<double> x, y;
};
/// Draws series into a PNG with gnuplot. @throws invalid_argument when gnuplot is missing or fails.
void plot_png(const std::string& path, const std::string& title, const std::string& xlabel,
              const std::string& ylabel, const std::vector<plot_series>& series, bool logx);

/// The JSON in the regular file at path (opened O_NOFOLLOW | O_NONBLOCK: a FIFO is never waited on; at
/// most 256 MiB). @throws invalid_argument naming the path and why not.
nlohmann::json read_json(const std::string& path);
/// A JSON reader's complaint in the CLI's words: the field missing or of another kind, the byte where the
/// text stops being JSON (the reader's code numbers and unprintable bytes left out).
std::string json_problem(const nlohmann::json::exception& e);
/// Adds bench/peers/peers.py's series (time over memcpy per system) from the JSON at path ("" = none).
/// @throws invalid_argument when the file is not that JSON.
void add_peer_series(const std::string& path, std::vector<plot_series>& series);
/// `bench pipeline --from`: draws an earlier --json output of bench pipeline into o.plot.
int plot_pipeline_from(const bench_options& o);

}  // namespace resident::cli
