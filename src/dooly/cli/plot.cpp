// dooly plot RECORDING_OR_REPORT --out PREFIX: draws a run as PNG charts (docs/plot.md): PREFIX-power.png, each
// channel's power over time with the regions shaded (from a recording), and PREFIX-energy.png, energy by region
// as bars with their 95 % intervals (from a report, or from the recording analysed as `dooly analyze` does).
#include <cstdio>
#include <optional>

#include <fmt/format.h>

#include "dooly/cli/command_registry.hpp"
#include "dooly/common/error.hpp"
#include "dooly/energy/recording_analysis.hpp"
#include "dooly/plot/output.hpp"
#include "dooly/plot/run_charts.hpp"
#include "dooly/plot/run_input.hpp"
#include "dooly/plot/text.hpp"

namespace {

struct PlotArgs {
  std::string input;
  std::string out;
  std::optional<std::string> channel;
  size_t top = 10;
  int width_px = 1400;
  bool svg = false;
  std::optional<std::string> mode;
  std::optional<double> window_ms, delay_ms;
};

// Frees cairo's and fontconfig's caches when the command is done, whichever way it ends (declared before the
// figures, so it runs after them).
struct FontCachesReleased {
  FontCachesReleased() = default;
  FontCachesReleased(const FontCachesReleased&) = delete;
  FontCachesReleased& operator=(const FontCachesReleased&) = delete;
  ~FontCachesReleased() { dooly::plot::release_font_caches(); }
};

void write(dooly::plot::Chart& chart, const std::string& prefix, const std::string& what, bool svg) {
  const std::string png = fmt::format("{}-{}.png", prefix, what);
  chart.figure.write_png(png);
  fmt::print("wrote {} ({} x {} px: {})\n", png, chart.figure.width_px(), chart.figure.height_px(), chart.summary);
  if (svg) {
    const std::string path = fmt::format("{}-{}.svg", prefix, what);
    chart.figure.write_svg(path);
    fmt::print("wrote {}\n", path);
  }
}

dooly::energy::Report analyze(const dooly::energy::Recording& rec, const PlotArgs& a) {
  dooly::energy::AnalysisOptions o;
  o.mode = dooly::energy::mode_from_string(a.mode.value_or("model"));
  if (a.window_ms) o.sensor_window_ns = static_cast<int64_t>(*a.window_ms * 1e6);
  if (a.delay_ms) o.sensor_delay_ns = static_cast<int64_t>(*a.delay_ms * 1e6);
  return dooly::energy::analyze_recording(rec, o);
}

void run_plot(const PlotArgs& a) {
  using namespace dooly;
  const FontCachesReleased release;
  // The output folder is checked before the work, so a bad --out is one line up front.
  plot::check_writable(a.out + "-energy.png");
  plot::RunInput in = plot::read_run_input(a.input);
  if (in.report && (a.mode || a.window_ms || a.delay_ms))
    DOOLY_THROW(InputError, "leave them out, or pass the recording the report was made from",
                "--mode, --sensor-window-ms and --sensor-delay-ms re-analyse a recording; '{}' is a report, "
                "analysed already",
                a.input);
  const plot::RunChartOptions options{a.channel, a.top, a.width_px, a.input};
  if (in.recording) {
    plot::Chart power = plot::power_chart(*in.recording, options);
    write(power, a.out, "power", a.svg);
    in.report = analyze(*in.recording, a);
  }
  plot::Chart energy = plot::energy_chart(*in.report, options);
  write(energy, a.out, "energy", a.svg);
  if (!in.recording)
    fmt::print("no {}-power.png: a report holds no power readings (plot the recording, DOOLY_RECORD, for it)\n", a.out);
}

void setup_plot(CLI::App& app) {
  auto args = std::make_shared<PlotArgs>();
  CLI::App* cmd = app.add_subcommand(
      "plot", "Draw a run as PNG: power over time with its regions shaded, and energy by region as bars");
  cmd->add_option("input", args->input, "a recording (DOOLY_RECORD) or a JSON report (version 2)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--out", args->out, "write PREFIX-power.png and PREFIX-energy.png")->required();
  cmd->add_option("--channel", args->channel, "only this channel (default: every channel)");
  cmd->add_option("--top", args->top, "regions shaded in colour / bars drawn, the largest first (default 10)")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--width", args->width_px, "the charts' width in pixels (default 1400)")
      ->check(CLI::Range(400, 8000));
  cmd->add_flag("--svg", args->svg, "also write PREFIX-power.svg and PREFIX-energy.svg");
  cmd->add_option("--mode", args->mode, "recording: the attribution mode the bars show (default model)")
      ->check(CLI::IsMember({"trapezoid", "model"}));
  cmd->add_option("--sensor-window-ms", args->window_ms, "recording: the sensor's averaging window (model mode)")
      ->check(CLI::Range(0.0, 60000.0));
  cmd->add_option("--sensor-delay-ms", args->delay_ms, "recording: the sensor's lag (model mode)")
      ->check(CLI::Range(0.0, 60000.0));
  cmd->callback([args] { run_plot(*args); });
}

const bool registered = dooly::cli::add_command("plot", &setup_plot);

}  // namespace
