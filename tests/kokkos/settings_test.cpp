// The settings table (common/settings.hpp): the environment reader and the tool arguments it drives, its
// checks, the deprecated DOOLY_MODEL, and the docs' list, which must be the table itself.
#include "dooly/common/settings.hpp"

#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "dooly/common/error.hpp"
#include "dooly/energy/profiler.hpp"
#include "dooly/kokkos/connector.hpp"

namespace dooly::energy {
namespace {

class SettingsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const SettingSpec& s : setting_specs()) {
      const std::string var = "DOOLY_" + std::string(s.name);
      if (const char* old = std::getenv(var.c_str())) saved_.emplace_back(var, old);
      unsetenv(var.c_str());
    }
  }
  void TearDown() override {
    for (const SettingSpec& s : setting_specs()) unsetenv(("DOOLY_" + std::string(s.name)).c_str());
    for (const auto& [k, v] : saved_) setenv(k.c_str(), v.c_str(), 1);
  }
  std::vector<std::pair<std::string, std::string>> saved_;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST_F(SettingsTest, EnvironmentValuesAreTypedAndArgumentsOverrideThem) {
  setenv("DOOLY_PERIOD_MS", "12.5", 1);
  setenv("DOOLY_MODE", "trapezoid", 1);
  setenv("DOOLY_GPUS", "0,2", 1);
  SettingValues v = SettingValues::from_env();
  EXPECT_EQ(v.number("PERIOD_MS"), 12.5);
  EXPECT_EQ(v.choice("MODE"), "trapezoid");
  EXPECT_EQ(v.list("GPUS"), (std::vector<std::string>{"0", "2"}));
  EXPECT_FALSE(v.has("RECORD"));
  v.apply_args({"./prog", "Period_MS=3", "record=/tmp/x.rec", "mode="});
  EXPECT_EQ(v.number("PERIOD_MS"), 3.0);
  EXPECT_EQ(v.text("RECORD"), "/tmp/x.rec");
  EXPECT_FALSE(v.has("MODE"));  // mode= unsets it, as an empty variable does
  const ProfilerOptions o = ProfilerOptions::from_settings(v);
  EXPECT_EQ(o.period_ns, 3'000'000);
  EXPECT_EQ(o.record_path, "/tmp/x.rec");
  EXPECT_EQ(o.mode, ProfilerOptions{}.mode);
  EXPECT_EQ(o.power.cuda_devices, (std::vector<int>{0, 2}));
}

TEST_F(SettingsTest, BadValuesNameTheSettingWhatItGotAndTheRange) {
  setenv("DOOLY_PERIOD_MS", "0.5", 1);
  EXPECT_EQ(error_of([] { SettingValues::from_env(); }),
            "DOOLY_PERIOD_MS='0.5' is not a number in [1, 10000] — set DOOLY_PERIOD_MS to a number between 1 and "
            "10000, or unset it");
  unsetenv("DOOLY_PERIOD_MS");
  setenv("DOOLY_MAX_EVENTS", "99999999999", 1);
  EXPECT_EQ(error_of([] { SettingValues::from_env(); }),
            "DOOLY_MAX_EVENTS='99999999999' is not a whole number in [1024, 67108864] — set DOOLY_MAX_EVENTS to a "
            "whole number between 1024 and 67108864, or unset it");
  unsetenv("DOOLY_MAX_EVENTS");
  setenv("DOOLY_MODE", "Model", 1);
  EXPECT_EQ(error_of([] { SettingValues::from_env(); }),
            "DOOLY_MODE='Model' is not one of model|trapezoid — set DOOLY_MODE to one of model|trapezoid, or unset it");
  unsetenv("DOOLY_MODE");
  setenv("DOOLY_TABLE", "maybe", 1);
  EXPECT_EQ(error_of([] { SettingValues::from_env(); }),
            "DOOLY_TABLE='maybe' is not 1 or 0 — set DOOLY_TABLE to 1 or 0, or unset it");
  unsetenv("DOOLY_TABLE");
  setenv("DOOLY_NVML_MODE", "fast", 1);  // environment-only settings are checked too
  EXPECT_NE(
      error_of([] { SettingValues::from_env(); }).find("DOOLY_NVML_MODE='fast' is not one of samples|instant|average"),
      std::string::npos);
  unsetenv("DOOLY_NVML_MODE");
  SettingValues v;
  EXPECT_EQ(error_of([&] {
              v.apply_args({"./prog", "baseline_w=-1"});
            }),
            "baseline_w='-1' is not a number in [0, 1000000] — give baseline_w a number between 0 and 1000000");
  EXPECT_EQ(error_of([&] {
              v.apply_args({"./prog", "gpus=0,,1"});
            }),
            "gpus='0,,1' has an empty item — write gpus as a comma-separated list without empty items");
}

TEST_F(SettingsTest, DeprecatedModelStillWorksWithOneWarningAndFitIsItsName) {
  setenv("DOOLY_MODEL", "0", 1);
  SettingValues v = SettingValues::from_env();
  EXPECT_EQ(v.flag("FIT"), false);
  EXPECT_FALSE(ProfilerOptions::from_settings(v).attribution.model);
  EXPECT_EQ(v.warnings(),
            std::vector<std::string>{"DOOLY_MODEL is deprecated (it is one letter from DOOLY_MODE): use DOOLY_FIT=0"});
  unsetenv("DOOLY_MODEL");

  setenv("DOOLY_FIT", "0", 1);
  v = SettingValues::from_env();
  EXPECT_EQ(v.flag("FIT"), false);
  EXPECT_FALSE(ProfilerOptions::from_settings(v).attribution.model);
  EXPECT_TRUE(v.warnings().empty());
  setenv("DOOLY_MODEL", "1", 1);  // both: the new name wins
  EXPECT_EQ(SettingValues::from_env().flag("FIT"), false);

  SettingValues a;
  a.apply_args({"./prog", "model=0"});
  EXPECT_EQ(a.flag("FIT"), false);
  EXPECT_EQ(a.warnings(), std::vector<std::string>{"model is deprecated (it is one letter from mode): use fit=0"});
  EXPECT_THROW((void)a.flag("MODEL"), std::logic_error);  // read through its new name only
}

// The table's defaults in words are the ones the option structs hold.
TEST_F(SettingsTest, StatedDefaultsAreTheDefaultsInForce) {
  const ProfilerOptions p;
  const kokkos::ConnectorSettings c;
  EXPECT_EQ(find_setting("MODE")->fallback, to_string(p.mode));
  EXPECT_EQ(find_setting("MAX_EVENTS")->fallback, std::to_string(p.max_buffered_events));
  EXPECT_EQ(find_setting("FIT")->fallback, p.attribution.model ? "1" : "0");
  EXPECT_EQ(find_setting("BASELINE_MS")->fallback, std::to_string(p.baseline_measure_ns));
  EXPECT_EQ(find_setting("REPLAY_REALTIME")->fallback, p.power.replay_realtime ? "1" : "0");
  EXPECT_EQ(find_setting("TABLE")->fallback, c.output.table ? "1" : "0");
  EXPECT_EQ(find_setting("RANKS")->fallback, c.output.detect_ranks ? "auto" : "off");
  EXPECT_EQ(find_setting("RANKS_WAIT_S")->fallback, fmt::format("{:g}", c.output.ranks_wait_s));
  EXPECT_EQ(find_setting("RANKS_KEEP")->fallback, c.output.keep_rank_files ? "1" : "0");
  EXPECT_EQ(find_setting("RANKS_TABLES")->fallback, c.output.rank_tables ? "1" : "0");
  EXPECT_EQ(find_setting("FENCES")->fallback, c.fences ? "1" : "0");
  EXPECT_FALSE(p.period_given);
}

TEST_F(SettingsTest, EveryNonEnvironmentSettingIsReadByTheConnector) {
  // A setting in the table that no reader consumes would be accepted and ignored: give each a valid value as an
  // argument and check that the settings it lands in differ from the defaults.
  const kokkos::ConnectorSettings base = kokkos::ConnectorSettings::from_settings(SettingValues{});
  auto differs = [&](const std::string& word) {
    SettingValues v;
    v.apply_args({"./prog", word});
    const kokkos::ConnectorSettings s = kokkos::ConnectorSettings::from_settings(v);
    const ProfilerOptions &a = s.profiler, &b = base.profiler;
    return a.source != b.source || a.power.path != b.power.path || a.power.replay_realtime != b.power.replay_realtime ||
           a.period_ns != b.period_ns || a.baseline_measure_ns != b.baseline_measure_ns ||
           a.sensor_window_ns != b.sensor_window_ns || a.sensor_delay_ns != b.sensor_delay_ns ||
           a.attribution.model != b.attribution.model || a.attribution.split_overlaps != b.attribution.split_overlaps ||
           a.attribution.split_span_ns != b.attribution.split_span_ns ||
           a.attribution.baseline_w != b.attribution.baseline_w || a.mode != b.mode || a.record_path != b.record_path ||
           a.max_buffered_events != b.max_buffered_events || a.trace_path != b.trace_path ||
           a.trace_max_windows != b.trace_max_windows || a.max_staged_events != b.max_staged_events ||
           a.power.cuda_devices != b.power.cuda_devices || s.output.prefix != base.output.prefix ||
           s.output.table != base.output.table || s.fences != base.fences ||
           s.output.table_path != base.output.table_path || s.output.detect_ranks != base.output.detect_ranks ||
           s.output.ranks_wait_s != base.output.ranks_wait_s ||
           s.output.keep_rank_files != base.output.keep_rank_files || s.output.rank_tables != base.output.rank_tables ||
           s.log_level != base.log_level;
  };
  const std::map<std::string, std::string> value = {{"POWER_SOURCE", "replay"},
                                                    {"GPUS", "1"},
                                                    {"PERIOD_MS", "7"},
                                                    {"MODE", "trapezoid"},
                                                    {"FIT", "0"},
                                                    {"MODEL", "0"},
                                                    {"BASELINE_W", "90"},
                                                    {"BASELINE_MS", "5"},
                                                    {"OUTPUT", "x"},
                                                    {"TABLE", "0"},
                                                    {"TABLE_FILE", "t.txt"},
                                                    {"RECORD", "r.rec"},
                                                    {"RANKS", "off"},
                                                    {"RANKS_WAIT_S", "5"},
                                                    {"RANKS_KEEP", "0"},
                                                    {"RANKS_TABLES", "1"},
                                                    {"FENCES", "1"},
                                                    {"SENSOR_WINDOW_MS", "3"},
                                                    {"SENSOR_DELAY_MS", "3"},
                                                    {"MAX_EVENTS", "2048"},
                                                    {"REPLAY_FILE", "f.rec"},
                                                    {"REPLAY_REALTIME", "0"},
                                                    {"LOG", "debug"},
                                                    {"TRACE", "t.json"},
                                                    {"TRACE_MAX_WINDOWS", "5"},
                                                    {"CUPTI_MAX_PENDING", "4096"},
                                                    {"OVERLAP_SPLIT", "0"},
                                                    {"OVERLAP_SPAN_MS", "30"}};
  for (const SettingSpec& spec : setting_specs()) {
    if (spec.environment_only) continue;
    // The CUPTI front end's own settings are read by it (tests/cupti/tracer_test.cpp checks them the same way).
    if (spec.name.starts_with("CUPTI_") && spec.name != "CUPTI_MAX_PENDING") continue;
    ASSERT_TRUE(value.count(std::string(spec.name))) << spec.name << ": add a value to this test";
    EXPECT_TRUE(differs(std::string(spec.name) + "=" + value.at(std::string(spec.name)))) << spec.name;
  }
}

TEST_F(SettingsTest, DocsListIsTheTable) {
  std::ifstream in(std::string(DOOLY_SOURCE_DIR) + "/docs/kokkos.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const std::string begin = "<!-- settings: begin (tests/kokkos/settings_test.cpp keeps this equal to the table) -->\n";
  const std::string end = "<!-- settings: end -->";
  const size_t a = doc.find(begin), b = doc.find(end);
  ASSERT_NE(a, std::string::npos) << "docs/kokkos.md lacks the settings markers";
  ASSERT_NE(b, std::string::npos);
  EXPECT_EQ(doc.substr(a + begin.size(), b - a - begin.size()), settings_markdown())
      << "replace the list in docs/kokkos.md with:\n"
      << settings_markdown();
  // The README points at that list instead of keeping its own.
  std::ifstream readme_in(std::string(DOOLY_SOURCE_DIR) + "/README.md");
  std::stringstream readme;
  readme << readme_in.rdbuf();
  EXPECT_NE(readme.str().find("docs/kokkos.md#settings"), std::string::npos);
}

}  // namespace
}  // namespace dooly::energy
