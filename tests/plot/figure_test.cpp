// Figures rendered from known data, checked where it matters: the PNG's header, the colours of pixels at the
// places the axes' data-to-pixel mapping computes, the SVG's structure, determinism and the write errors.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "dooly/common/error.hpp"
#include "dooly/plot/cdf.hpp"
#include "dooly/plot/figure.hpp"
#include "plot/png_image.hpp"
#include "support/temp_dir.hpp"

namespace dooly::plot {
namespace {

using testing::Image;
using testing::near;
using testing::over_white;

constexpr Rgb kRed = Rgb::hex(0xd62728);
constexpr Rgb kBlue = Rgb::hex(0x1f77b4);
constexpr Rgb kGreen = Rgb::hex(0x2ca02c);

// A 0..10 by 0..10 axes filling a 600 x 400 figure, no legend.
Axes& square_axes(Figure& fig) {
  Axes& ax = fig.add_axes();
  ax.x_limits(0, 10).y_limits(0, 10).legend(LegendPlace::none).x_label("x").y_label("y");
  return ax;
}

Image written(Figure& fig, const dooly::testing::TempDir& dir, const std::string& name = "f.png") {
  fig.write_png(dir.file(name));
  return Image(dir.file(name));
}

TEST(FigurePng, SignatureAndSize) {
  Figure fig(640, 360, "size");
  square_axes(fig);
  const std::string bytes = fig.png();
  const testing::PngHeader h = testing::png_header(bytes);
  EXPECT_EQ(h.width, 640u);
  EXPECT_EQ(h.height, 360u);
  EXPECT_EQ(h.bit_depth, 8);
  EXPECT_EQ(h.color_type, 2);  // RGB, no alpha
  EXPECT_EQ(bytes.substr(bytes.size() - 8, 4), "IEND");
}

TEST(FigurePng, HorizontalLineLandsOnItsRow) {
  dooly::testing::TempDir dir;
  Figure fig(600, 400);
  Axes& ax = square_axes(fig);
  ax.add(Line{.label = "five", .x = {0, 10}, .y = {5, 5}, .color = kRed});
  const Image img = written(fig, dir);
  // A 2 px line centred on y_px covers the whole pixel row floor(y_px).
  const double row = std::floor(ax.y_to_px(5));
  for (double x : {1.0, 3.3, 5.0, 8.9}) {
    EXPECT_TRUE(near(img.at(ax.x_to_px(x), row), kRed)) << "x=" << x;
    EXPECT_FALSE(near(img.at(ax.x_to_px(x), row - 6), kRed, 60));
    EXPECT_FALSE(near(img.at(ax.x_to_px(x), row + 6), kRed, 60));
  }
  // The mapping itself: y = 5 is halfway up the plot area.
  EXPECT_DOUBLE_EQ(ax.y_to_px(5), ax.area().y + ax.area().height / 2);
}

TEST(FigurePng, StepLineHoldsUntilTheNextX) {
  dooly::testing::TempDir dir;
  Figure fig(600, 400);
  Axes& ax = square_axes(fig);
  ax.add(Line{.x = {0, 5, 10}, .y = {2, 8, 8}, .color = kRed, .step = true});
  const Image img = written(fig, dir);
  EXPECT_TRUE(near(img.at(ax.x_to_px(2.5), ax.y_to_px(2)), kRed));       // held at 2 until x = 5
  EXPECT_FALSE(near(img.at(ax.x_to_px(2.5), ax.y_to_px(5)), kRed, 60));  // not the slope a line would take
  EXPECT_TRUE(near(img.at(ax.x_to_px(7.5), ax.y_to_px(8)), kRed));
  EXPECT_TRUE(near(img.at(ax.x_to_px(5), ax.y_to_px(5)), kRed));  // the riser at x = 5
}

TEST(FigurePng, ShadedSpanCoversItsColumns) {
  dooly::testing::TempDir dir;
  Figure fig(600, 400);
  Axes& ax = square_axes(fig);
  ax.add(Spans{.label = "solve", .ranges = {{2, 4}}, .color = kBlue, .opacity = 0.25, .text_in_widest = false});
  const Image img = written(fig, dir);
  const double mid = ax.y_to_px(3.3);  // away from the grid lines at even y
  const Rgb shade = over_white(kBlue, 0.25);
  for (double x = std::ceil(ax.x_to_px(2)) + 1; x < ax.x_to_px(4) - 1; x += 3)
    EXPECT_TRUE(near(img.at(x, mid), shade)) << "column " << x;
  EXPECT_TRUE(near(img.at(ax.x_to_px(1.3), mid), kWhite));
  EXPECT_TRUE(near(img.at(ax.x_to_px(5.3), mid), kWhite));
  // The whole height of the area.
  EXPECT_TRUE(near(img.at(ax.x_to_px(3.1), ax.area().y + 2), shade));
  EXPECT_TRUE(near(img.at(ax.x_to_px(3.1), ax.area().bottom() - 3), shade));
}

TEST(FigurePng, HorizontalBarsAreProportionalAndTopDown) {
  dooly::testing::TempDir dir;
  Figure fig(600, 400);
  Axes& ax = fig.add_axes();
  ax.legend(LegendPlace::none).x_limits(0, 10);
  ax.add(Bars{.categories = {"big", "half", "quarter"}, .values = {8, 4, 2}, .color = kGreen, .horizontal = true});
  const Image img = written(fig, dir);
  std::vector<double> lengths;
  std::vector<double> rows;
  for (int i = 0; i < 3; ++i) {
    const double row = ax.y_to_px(i);
    rows.push_back(row);
    double x = ax.area().x + 2;
    while (near(img.at(x, row), kGreen)) x += 1;
    lengths.push_back(x - ax.x_to_px(0));
  }
  EXPECT_LT(rows[0], rows[1]);  // the first category on top
  EXPECT_LT(rows[1], rows[2]);
  EXPECT_NEAR(lengths[0], ax.x_to_px(8) - ax.x_to_px(0), 1.5);
  EXPECT_NEAR(lengths[1] / lengths[0], 0.5, 0.01);
  EXPECT_NEAR(lengths[2] / lengths[0], 0.25, 0.01);
}

TEST(FigurePng, VerticalBarsWithErrorWhiskers) {
  dooly::testing::TempDir dir;
  Figure fig(600, 400);
  Axes& ax = fig.add_axes();
  ax.legend(LegendPlace::none).y_limits(0, 10);
  ax.add(Bars{.categories = {"a", "b"}, .values = {6, 3}, .errors = {2, NAN}, .color = kGreen});
  const Image img = written(fig, dir);
  const double c0 = ax.x_to_px(0), c1 = ax.x_to_px(1);
  EXPECT_TRUE(near(img.at(c0 + 5, ax.y_to_px(5.5)), kGreen));
  EXPECT_TRUE(near(img.at(c1 + 5, ax.y_to_px(2.5)), kGreen));
  EXPECT_TRUE(near(img.at(c1 + 5, ax.y_to_px(3.5)), kWhite));
  // The whisker of bar a goes up to 8 (dark, over white), bar b has none.
  EXPECT_TRUE(near(img.at(std::floor(c0), ax.y_to_px(7.5)), kInk, 40));
  EXPECT_TRUE(near(img.at(std::floor(c1), ax.y_to_px(3.7)), kWhite));
}

TEST(FigurePng, LogAxisAndSecondYAxis) {
  dooly::testing::TempDir dir;
  Figure fig(600, 400);
  Axes& ax = fig.add_axes();
  ax.legend(LegendPlace::none).x_limits(0, 10).y_scale(ScaleKind::log).y_limits(1, 1e4);
  ax.y_limits(0, 1, YSide::right).y_label("fraction", YSide::right);
  ax.add(Line{.x = {0, 10}, .y = {100, 100}, .color = kRed});
  ax.add(Line{.x = {0, 10}, .y = {0.25, 0.25}, .color = kBlue, .side = YSide::right});
  const Image img = written(fig, dir);
  EXPECT_NEAR(ax.y_to_px(100), ax.area().y + ax.area().height / 2, 1e-9);  // two of four decades up
  EXPECT_TRUE(near(img.at(ax.x_to_px(3.3), std::floor(ax.y_to_px(100))), kRed));
  EXPECT_NEAR(ax.y_to_px(0.25, YSide::right), ax.area().bottom() - ax.area().height / 4, 1e-9);
  EXPECT_TRUE(near(img.at(ax.x_to_px(3.3), std::floor(ax.y_to_px(0.25, YSide::right))), kBlue));
}

TEST(FigurePng, CdfOfSamples) {
  dooly::testing::TempDir dir;
  Figure fig(600, 400);
  Axes& ax = fig.add_axes();
  ax.legend(LegendPlace::none).x_limits(0, 4).y_limits(0, 1);
  Line cdf = empirical_cdf("t", {3, 1, 2, 2});
  cdf.color = kRed;
  ax.add(cdf);
  const Image img = written(fig, dir);
  EXPECT_TRUE(near(img.at(ax.x_to_px(1.5), std::floor(ax.y_to_px(0.25))), kRed));
  EXPECT_TRUE(near(img.at(ax.x_to_px(2.5), std::floor(ax.y_to_px(0.75))), kRed));
  EXPECT_FALSE(near(img.at(ax.x_to_px(2.5), std::floor(ax.y_to_px(0.5))), kRed, 60));
}

TEST(FigurePng, ScatterPointsAtTheirPlace) {
  dooly::testing::TempDir dir;
  Figure fig(600, 400);
  Axes& ax = square_axes(fig);
  ax.add(Scatter{.x = {2, 7}, .y = {3, 9}, .color = kBlue, .radius_px = 4});
  const Image img = written(fig, dir);
  EXPECT_TRUE(near(img.at(ax.x_to_px(2), ax.y_to_px(3)), kBlue));
  EXPECT_TRUE(near(img.at(ax.x_to_px(7), ax.y_to_px(9)), kBlue));
  EXPECT_FALSE(near(img.at(ax.x_to_px(7), ax.y_to_px(3)), kBlue, 60));
}

// Automatic limits come from the data, widened to nice numbers, and include 0 when asked.
TEST(FigureLayout, AutomaticLimits) {
  Figure fig(600, 400);
  Axes& ax = fig.add_axes();
  ax.add(Line{.x = {0.3, 24.97}, .y = {78.2, 365.2}});
  ax.add(Spans{.ranges = {{-1.2, 2}}});
  EXPECT_DOUBLE_EQ(ax.x_limits().lo, -5);
  EXPECT_DOUBLE_EQ(ax.x_limits().hi, 25);
  EXPECT_DOUBLE_EQ(ax.y_limits().lo, 50);
  ax.y_from_zero();
  EXPECT_DOUBLE_EQ(ax.y_limits().lo, 0);
  EXPECT_DOUBLE_EQ(ax.y_limits().hi, 400);
  fig.layout();
  EXPECT_GT(ax.area().width, 400);
  EXPECT_DOUBLE_EQ(ax.x_to_px(-5), ax.area().x);
}

// Stacked axes share the height by weight and do not overlap.
TEST(FigureLayout, StackedAxes) {
  Figure fig(600, 600, "two");
  Axes& top = fig.add_axes(2);
  Axes& bottom = fig.add_axes(1);
  fig.layout();
  EXPECT_LT(top.area().bottom(), bottom.area().y);
  EXPECT_GT(top.area().height, 1.5 * bottom.area().height);
}

TEST(FigureData, EmptySeriesAndEmptyAxesStillDraw) {
  dooly::testing::TempDir dir;
  Figure fig(600, 400, "nothing yet");
  Axes& ax = fig.add_axes();
  ax.add(Line{.label = "empty"});
  ax.add(empirical_cdf("no samples", {}));
  ax.add(Bars{.label = "none", .horizontal = true});
  ax.add(Spans{.label = "no windows"});
  EXPECT_TRUE(ax.empty());
  const Image img = written(fig, dir);
  EXPECT_DOUBLE_EQ(ax.x_limits().lo, 0);
  EXPECT_DOUBLE_EQ(ax.x_limits().hi, 1);
  // "no data" is written in the middle of the area: some dark pixels there.
  int dark = 0;
  const Rect& a = ax.area();
  for (double x = a.x + a.width / 2 - 30; x < a.x + a.width / 2 + 30; ++x)
    for (double y = a.y + a.height / 2 - 8; y < a.y + a.height / 2 + 8; ++y) dark += img.at(x, y).r < 160;
  EXPECT_GT(dark, 20);
}

TEST(FigureData, MismatchedLengthsAreRefused) {
  Figure fig(600, 400);
  Axes& ax = fig.add_axes();
  EXPECT_THROW(ax.add(Line{.x = {1, 2}, .y = {1}}), std::invalid_argument);
  EXPECT_THROW(ax.add(Bars{.categories = {"a"}, .values = {1, 2}}), std::invalid_argument);
  EXPECT_THROW(ax.add(Bars{.categories = {"a"}, .values = {1}, .errors = {1, 2}}), std::invalid_argument);
  EXPECT_THROW(Figure(4, 400), std::invalid_argument);
}

// A small check that the SVG is well-formed XML: every tag closed in order, one root.
bool well_formed(const std::string& xml, std::string& why) {
  std::vector<std::string> open;
  int roots = 0;
  for (size_t i = xml.find('<'); i != std::string::npos; i = xml.find('<', i + 1)) {
    const size_t end = xml.find('>', i);
    if (end == std::string::npos) return why = "unclosed '<'", false;
    const std::string tag = xml.substr(i + 1, end - i - 1);
    if (tag.empty() || tag[0] == '?' || tag[0] == '!') continue;
    const std::string name = tag.substr(tag[0] == '/', tag.find_first_of(" \t\n/>", 1) - (tag[0] == '/'));
    if (tag[0] == '/') {
      if (open.empty() || open.back() != name) return why = "</" + name + "> does not close the open tag", false;
      open.pop_back();
    } else if (tag.back() != '/') {
      if (open.empty()) ++roots;
      open.push_back(name);
    }
  }
  if (!open.empty()) return why = "<" + open.back() + "> is never closed", false;
  if (roots != 1) return why = "not one root element", false;
  return true;
}

// cairo writes a colour as rgb(r%, g%, b%) with six decimals.
std::string svg_color(const Rgb& c) { return fmt::format("rgb({:f}%,{:f}%,{:f}%)", c.r * 100, c.g * 100, c.b * 100); }

TEST(FigureSvg, WellFormedAndHoldsTheSeries) {
  Figure fig(600, 400, "svg");
  Axes& ax = square_axes(fig);
  ax.add(Line{.label = "five", .x = {1, 9}, .y = {5, 5}, .color = kRed});
  ax.add(Spans{.label = "region", .ranges = {{2, 4}}, .color = kBlue});
  const std::string svg = fig.svg();
  std::string why;
  EXPECT_TRUE(well_formed(svg, why)) << why;
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("width=\"600pt\""), std::string::npos) << svg.substr(0, 300);
  EXPECT_NE(svg.find("stroke:" + svg_color(kRed)), std::string::npos);  // the line
  EXPECT_NE(svg.find("fill:" + svg_color(kBlue)), std::string::npos);   // the span
  // The line's path runs from x(1) to x(9) at y(5) (cairo keeps 1/256 px).
  const size_t style = svg.find("stroke:" + svg_color(kRed));
  const size_t d = svg.find(" d=\"M ", style);
  ASSERT_NE(d, std::string::npos);
  std::istringstream path(svg.substr(d + 4, 80));
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  char m = 0, l = 0;
  path >> m >> x0 >> y0 >> l >> x1 >> y1;
  EXPECT_EQ(m, 'M');
  EXPECT_EQ(l, 'L');
  EXPECT_NEAR(x0, ax.x_to_px(1), 0.01);
  EXPECT_NEAR(y0, ax.y_to_px(5), 0.01);
  EXPECT_NEAR(x1, ax.x_to_px(9), 0.01);
  EXPECT_NEAR(y1, ax.y_to_px(5), 0.01);
}

TEST(FigureSvg, ManySpansMergeIntoFewShapes) {
  Figure fig(800, 300);
  Axes& ax = fig.add_axes();
  ax.x_limits(0, 10).y_limits(0, 1);
  Spans s{.label = "kernels", .color = kBlue, .opacity = 1.0};
  for (int i = 0; i < 100000; ++i) s.ranges.push_back({i * 1e-4, i * 1e-4 + 0.9e-4});  // 10^5 windows
  ax.add(std::move(s));
  const std::string svg = fig.svg();
  EXPECT_LT(svg.size(), 60000u) << "the windows were not merged at pixel resolution";
  dooly::testing::TempDir dir;
  const Image img = written(fig, dir);
  for (double x : {0.5, 3.3, 9.5}) EXPECT_TRUE(near(img.at(ax.x_to_px(x), ax.y_to_px(0.3)), kBlue)) << x;
}

TEST(FigureOutput, SameFigureSameBytes) {
  const auto make = [] {
    Figure fig(500, 300, "deterministic");
    Axes& ax = fig.add_axes();
    ax.x_label("t (s)").y_label("P (W)");
    ax.add(Line{.label = "gpu0", .x = {0, 1, 2}, .y = {100, 300, 200}});
    ax.add(Spans{.label = "solve", .ranges = {{0.5, 1.5}}});
    return fig;
  };
  Figure a = make(), b = make();
  EXPECT_EQ(a.png(), b.png());
  EXPECT_EQ(a.svg(), b.svg());
  EXPECT_EQ(a.png(), a.png());
}

TEST(FigureOutput, UnwritablePathIsOneLineNamingTheFile) {
  dooly::testing::TempDir dir;
  Figure fig(200, 100);
  fig.add_axes();
  const std::string path = dir.file("no-such-folder/f.png");
  try {
    fig.write_png(path);
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos);
    EXPECT_NE(what.find("cannot write '" + path + "': No such file or directory"), std::string::npos) << what;
    EXPECT_NE(what.find("create its folder"), std::string::npos) << what;
  }
  EXPECT_THROW(fig.write_svg(path), InputError);
  EXPECT_FALSE(std::filesystem::exists(dir.file("no-such-folder")));
}

TEST(FigureOutput, WritesAtomicallyAndReplaces) {
  dooly::testing::TempDir dir;
  const std::string path = dir.file("f.svg");
  dooly::testing::write_file(path, "old");
  Figure fig(200, 100);
  fig.add_axes();
  fig.write_svg(path);
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  EXPECT_EQ(s.str(), fig.svg());
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1u);  // no temporary left beside it
}

}  // namespace
}  // namespace dooly::plot
