// The charts of a run: telling a recording from a report, the outermost windows that get shaded, and the two
// figures drawn from the H200 run shipped in data/runs/, checked by pixel against the figures' own mappings.
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dooly/common/error.hpp"
#include "dooly/energy/recording_analysis.hpp"
#include "dooly/energy/report_writers.hpp"
#include "dooly/plot/run_charts.hpp"
#include "dooly/plot/run_input.hpp"
#include "dooly/plot/run_windows.hpp"
#include "plot/png_image.hpp"
#include "support/temp_dir.hpp"

namespace dooly::plot {
namespace {

using testing::Image;
using testing::near;

const std::string kDemo = std::string(DOOLY_SOURCE_DIR) + "/data/runs/h200-kokkos-demo.recording";

// The error `f` throws, as text ("" when it throws none).
template <class F>
std::string input_error(F f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

energy::Report demo_report(const energy::Recording& rec) {
  energy::AnalysisOptions o;  // as scripts/demo.sh analyses this recording
  o.sensor_window_ns = 25'000'000;
  o.sensor_delay_ns = 4'000'000;
  return energy::analyze_recording(rec, o);
}

TEST(RunInput, TellsARecordingFromAReport) {
  const RunInput rec = read_run_input(kDemo);
  ASSERT_TRUE(rec.recording);
  EXPECT_FALSE(rec.report);
  EXPECT_EQ(rec.recording->channels.size(), 1u);

  dooly::testing::TempDir dir;
  dooly::testing::write_file(dir.file("r.json"), "\n  " + energy::to_json_text(demo_report(*rec.recording)));
  const RunInput rep = read_run_input(dir.file("r.json"));
  ASSERT_TRUE(rep.report);
  EXPECT_FALSE(rep.recording);
  EXPECT_EQ(rep.report->channels.at(0).channel.name, "gpu0");
}

TEST(RunInput, RefusesWhatIsNeither) {
  dooly::testing::TempDir dir;
  const auto error_for = [&](const std::string& text) {
    dooly::testing::write_file(dir.file("in"), text);
    return input_error([&] { read_run_input(dir.file("in")); });
  };
  EXPECT_NE(error_for("time,power\n1,2\n").find("is neither a dooly recording nor a JSON report — pass a recording"),
            std::string::npos);
  EXPECT_NE(error_for("").find("(it is empty)"), std::string::npos);
  EXPECT_NE(error_for(" \n\t ").find("(it is empty)"), std::string::npos);
  EXPECT_NE(error_for("# a markdown title\n").find("is neither"), std::string::npos);  // '#' alone is not a header
  EXPECT_NE(error_for("{ nope").find("is not valid JSON"), std::string::npos);
  EXPECT_NE(error_for("# dooly-recording v2\n").find("recording format 'v2' is not supported"), std::string::npos);
  const std::string newer = error_for(R"({"version": 3, "channels": []})");
  EXPECT_NE(newer.find(dir.file("in") + ": report version 3 is not supported (this dooly reads version 2)"),
            std::string::npos)
      << newer;
  EXPECT_NE(error_for(R"({"version": 1, "model": "toy"})").find("report version 1 is not supported"),
            std::string::npos);
  EXPECT_NE(input_error([&] { read_run_input(dir.file("absent")); }).find("cannot read"), std::string::npos);
}

TEST(RunInput, ChannelChoice) {
  EXPECT_EQ(chosen_channels({"gpu0", "gpu1"}, std::nullopt, "f"), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(chosen_channels({"gpu0", "gpu1"}, "gpu1", "f"), (std::vector<size_t>{1}));
  const std::string e = input_error([] { chosen_channels({"gpu0", "gpu1"}, "cpu0", "run.recording"); });
  EXPECT_EQ(e,
            "no channel 'cpu0' in 'run.recording' (its channels: gpu0, gpu1) — pass one of them to --channel, or leave "
            "--channel out for all");
}

// A recording built by hand: t in seconds, 1 s = 1e9 ns.
struct Builder {
  energy::Recording rec;
  Builder() {
    rec.meta = {{"run_start_ns", "0"}, {"run_end_ns", "10000000000"}};
    rec.channels.push_back(power::Channel{.name = "gpu0", .domain = power::Domain::gpu, .device = 0, .sensor = {}});
  }
  void key(uint32_t id, const std::string& name, const std::string& kind = "region") {
    rec.keys.push_back({id, kind, name});
  }
  void edge(bool begin, double t_s, uint32_t key, uint32_t thread = 0, int device = -1, bool nested = true) {
    rec.events.push_back(energy::Event{.t_ns = static_cast<int64_t>(t_s * 1e9),
                                       .key = key,
                                       .thread = thread,
                                       .device = device,
                                       .begin = begin,
                                       .flags = nested ? energy::flags::nested : 0u});
  }
  void window(double b, double e, uint32_t key, uint32_t thread = 0, int device = -1) {
    edge(true, b, key, thread, device);
    edge(false, e, key, thread, device);
  }
};

const RegionTime& named(const RunWindows& w, const std::string& name) {
  const auto it = std::find_if(w.regions.begin(), w.regions.end(), [&](const RegionTime& r) { return r.name == name; });
  if (it == w.regions.end()) throw std::runtime_error("no region " + name);
  return *it;
}

TEST(RunWindows, OutermostPerThreadMergedPerKey) {
  Builder b;
  b.key(1, "R");
  b.key(2, "K", "for");
  b.key(3, "S");
  b.key(4, "U");
  b.key(5, "section", "section");
  b.edge(true, 1.0, 1);
  b.window(2.0, 3.0, 2, 0, 0);  // kernels inside R: not outermost
  b.window(3.5, 4.0, 2, 0, 0);
  b.edge(false, 5.0, 1);
  b.window(6.0, 6.5, 2, 0, 0);  // outermost kernels, back to back: one range
  b.window(6.5, 7.0, 2, 0, 0);
  b.edge(false, 7.5, 9);               // an end nothing opened
  b.edge(true, 9.0, 4);                // never closed: ends with the run
  b.window(8.5, 8.6, 2, 0, 1);         // on GPU 1
  b.window(2.0, 8.0, 3, 1);            // another thread
  b.edge(true, 0.5, 5, 1, -1, false);  // a free section: not shaded
  b.edge(false, 9.5, 5, 1, -1, false);

  const RunWindows all = outermost_windows(b.rec);
  EXPECT_EQ(all.start_ns, 0);
  EXPECT_EQ(all.end_ns, 10'000'000'000);
  EXPECT_EQ(all.unmatched_ends, 1u);
  EXPECT_EQ(all.closed_at_end, 1u);
  ASSERT_EQ(all.regions.size(), 4u);    // R, K, S, U; no section
  EXPECT_EQ(all.regions[0].name, "S");  // by time open: S 6 s, R 4 s, K 1.1 s, U 1 s
  EXPECT_EQ(all.regions[1].name, "R");
  EXPECT_EQ(all.regions[2].name, "K");
  EXPECT_EQ(all.regions[3].name, "U");
  const RegionTime& k = named(all, "K");
  EXPECT_EQ(k.windows, 3u);
  ASSERT_EQ(k.ranges_s.size(), 2u);
  EXPECT_DOUBLE_EQ(k.ranges_s[0].x0, 6.0);
  EXPECT_DOUBLE_EQ(k.ranges_s[0].x1, 7.0);
  EXPECT_DOUBLE_EQ(k.ranges_s[1].x0, 8.5);
  EXPECT_NEAR(k.open_s, 1.1, 1e-12);
  EXPECT_EQ(named(all, "R").ranges_s.size(), 1u);
  EXPECT_DOUBLE_EQ(named(all, "U").ranges_s[0].x1, 10.0);
  EXPECT_EQ(named(all, "K").kind, "for");

  // GPU 0's channel sees the host's windows and GPU 0's, not GPU 1's.
  const RunWindows gpu0 = outermost_windows(b.rec, 0);
  EXPECT_EQ(named(gpu0, "K").windows, 2u);
  EXPECT_EQ(named(gpu0, "K").ranges_s.size(), 1u);
}

TEST(RunWindows, HundredThousandKernelsBecomeOneBand) {
  Builder b;
  b.key(1, "step", "for");
  for (int i = 0; i < 100000; ++i) b.window(1.0 + i * 5e-5, 1.0 + (i + 1) * 5e-5, 1, 0, 0);
  const RunWindows w = outermost_windows(b.rec);
  ASSERT_EQ(w.regions.size(), 1u);
  EXPECT_EQ(w.regions[0].windows, 100000u);
  ASSERT_EQ(w.regions[0].ranges_s.size(), 1u);
  EXPECT_NEAR(w.regions[0].ranges_s[0].x1, 6.0, 1e-9);
}

TEST(PowerChart, DemoRunRegionsShadedReadingsAtTheirValues) {
  const energy::Recording rec = read_run_input(kDemo).recording.value();
  Chart chart = power_chart(rec, {.source = "demo"});
  EXPECT_EQ(chart.summary, "1 channel(s), 1300 readings, 10 of 15 regions shaded");
  dooly::testing::TempDir dir;
  chart.figure.write_png(dir.file("p.png"));
  const Image img(dir.file("p.png"));
  EXPECT_EQ(img.width(), 1400);
  EXPECT_EQ(img.height(), 560);
  const Axes& ax = chart.figure.axes(0);
  const RunWindows w = outermost_windows(rec, 0);
  ASSERT_EQ(w.regions[0].name, "interleaved");  // open longest: first colour
  const Spans& band = ax.spans().at(0);
  EXPECT_EQ(band.label, "interleaved (8 s)");

  // The middle of "interleaved": most of the column is its shade; the curve crosses it near 311 W.
  const XRange r = w.regions[0].ranges_s.at(0);
  const double column = std::round(ax.x_to_px((r.x0 + r.x1) / 2)) + 0.5;
  const Rgb shade = testing::over_white(*band.color, band.opacity);
  int shaded = 0, dark_row = -1;
  for (int y = static_cast<int>(ax.area().y) + 1; y < static_cast<int>(ax.area().bottom()) - 1; ++y) {
    const testing::Pixel p = img.at(column, y);
    shaded += near(p, shade, 3);
    if (dark_row < 0 && p.r < 90 && p.g < 90 && p.b < 90) dark_row = y;
  }
  EXPECT_GT(shaded, 0.8 * ax.area().height);
  ASSERT_GE(dark_row, 0);
  const double top_w = ax.y().limits().hi, px_per_w = ax.area().height / (top_w - ax.y().limits().lo);
  const double power_w = top_w - (dark_row - ax.area().y) / px_per_w;
  EXPECT_NEAR(power_w, 311, 15);  // the H200 at ~311 W while the two kernels interleave

  // A region's band ends where the region does: idle:start (121 W) is not shaded as alone:stream.
  const Spans& stream = *std::find_if(ax.spans().begin(), ax.spans().end(),
                                      [](const Spans& s) { return s.label.rfind("alone:stream", 0) == 0; });
  const XRange sr = stream.ranges.at(0);
  const Rgb stream_shade = testing::over_white(*stream.color, stream.opacity);
  const double row = ax.y_to_px(50);
  EXPECT_TRUE(near(img.at(ax.x_to_px(sr.x0) + 3, row), stream_shade, 3));
  EXPECT_FALSE(near(img.at(ax.x_to_px(sr.x0) - 3, row), stream_shade, 3));
}

TEST(PowerChart, LongRunsAreThinnedAndSaySo) {
  Builder b;
  b.key(1, "solve");
  b.window(2.0, 8.0, 1);
  for (int i = 0; i < 100000; ++i)
    b.rec.samples.push_back(power::Reading{
        .channel = 0, .t_ns = 100'000LL * i, .power_w = i == 50000 ? 700.0 : 100.0 + (i % 50), .window_ns = -1});
  Chart chart = power_chart(b.rec, {.width_px = 1000, .source = "long"});
  const Line& line = chart.figure.axes(0).lines().at(0);
  EXPECT_LE(line.x.size(), 2000u);
  EXPECT_DOUBLE_EQ(*std::max_element(line.y.begin(), line.y.end()), 700.0);  // the spike survives
  ASSERT_FALSE(chart.figure.notes().empty());
  EXPECT_NE(chart.figure.notes()[0].find("gpu0: 100000 readings drawn as"), std::string::npos);
  EXPECT_LT(chart.figure.svg().size(), 400000u);
  EXPECT_THROW(power_chart(b.rec, {.channel = "gpu3"}), InputError);
}

// Bar lengths in pixels, measured along a row inside each bar but off its whisker.
std::vector<double> bar_lengths(const Image& img, const Axes& ax, const Rgb& color) {
  std::vector<double> out;
  const double offset = 0.25 * std::fabs(ax.y_to_px(1) - ax.y_to_px(0));
  for (size_t i = 0; i < ax.bars()->values.size(); ++i) {
    const double row = ax.y_to_px(static_cast<double>(i)) + offset;
    double x = ax.area().x + 2;
    while (x < ax.area().right() && near(img.at(x, row), color)) x += 1;
    out.push_back(x - ax.x_to_px(0));
  }
  return out;
}

TEST(EnergyChart, DemoRunLongestBarIsTheMostEnergy) {
  const energy::Recording rec = read_run_input(kDemo).recording.value();
  const energy::Report report = demo_report(rec);
  Chart chart = energy_chart(report, {.top = 10, .width_px = 1200, .source = "demo"});
  dooly::testing::TempDir dir;
  chart.figure.write_png(dir.file("e.png"));
  const Image img(dir.file("e.png"));
  EXPECT_EQ(img.width(), 1200);
  EXPECT_EQ(img.height(), chart.figure.height_px());
  EXPECT_EQ(chart.summary, "gpu0: 10 of 20 regions");

  const energy::ChannelReport& ch = report.channels.at(0);
  ASSERT_TRUE(ch.fit.fitted);
  const auto most = std::max_element(ch.rows.begin(), ch.rows.end(), [](const auto& a, const auto& b) {
    return a.model_energy_j.value_or(0) < b.model_energy_j.value_or(0);
  });
  const Axes& ax = chart.figure.axes(0);
  ASSERT_EQ(ax.bars()->values.size(), 10u);
  EXPECT_EQ(ax.bars()->categories[0], most->name);
  const std::vector<double> len = bar_lengths(img, ax, *ax.bars()->color);
  EXPECT_EQ(std::max_element(len.begin(), len.end()) - len.begin(), 0);
  EXPECT_NEAR(len[0], ax.x_to_px(*most->model_energy_j) - ax.x_to_px(0), 1.5);
  for (size_t i = 1; i < len.size(); ++i) {
    EXPECT_LE(len[i], len[i - 1] + 0.5);
    EXPECT_NEAR(len[i] / len[0], ax.bars()->values[i] / ax.bars()->values[0], 0.01);
  }
  // The whisker spans the 95 % interval.
  EXPECT_DOUBLE_EQ(ax.bars()->errors[0], *most->model_energy_hw_j);
  EXPECT_NE(ax.bars()->values_text[0].find(" J \u00b1 "), std::string::npos);
}

TEST(EnergyChart, SameFromTheReportAsFromTheRecording) {
  const energy::Report report = demo_report(read_run_input(kDemo).recording.value());
  const energy::Report again = energy::report_from_json(nlohmann::json::parse(energy::to_json_text(report)));
  Chart a = energy_chart(report, {.source = "demo"}), b = energy_chart(again, {.source = "demo"});
  EXPECT_EQ(a.figure.png(), b.figure.png());
  // The trapezoid's bars have no whiskers.
  energy::Report trapezoid = report;
  trapezoid.mode = energy::Mode::trapezoid;
  const Chart t = energy_chart(trapezoid, {.source = "demo"});
  for (double e : t.figure.axes(0).bars()->errors) {
    EXPECT_TRUE(std::isnan(e));
  }
}

}  // namespace
}  // namespace dooly::plot
