// The default registry: every backend once, in the documented detection order, and selection through it.
#include <gtest/gtest.h>

#include <filesystem>

#include "dooly/common/error.hpp"
#include "dooly/power/registry.hpp"
#include "dooly/power/replay/replay_provider.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_dir.hpp"

namespace dooly::power {
namespace {

using testing::ScopedEnv;
using testing::TempDir;

TEST(DefaultRegistry, HoldsEveryBackendInDetectionOrder) {
  const Registry r = make_default_registry();
  std::vector<std::string> names;
  for (const auto& p : r.providers()) {
    names.emplace_back(p->name());
    EXPECT_FALSE(p->description().empty());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"nvml", "variorum", "rapl", "replay"}));
  Registry again = make_default_registry();
  EXPECT_THROW(again.add(make_replay_provider()), DuplicateError);
}

TEST(DefaultRegistry, AutoDetectionFallsThroughToRaplAndSaysWhyOthersWereSkipped) {
  TempDir dir;
  std::filesystem::copy(std::string(DOOLY_SOURCE_DIR) + "/tests/power/fixtures/powercap_root", dir.path(),
                        std::filesystem::copy_options::recursive);
  ScopedEnv nvml("DOOLY_NVML_LIBRARY", nullptr), variorum("DOOLY_VARIORUM_LIBRARY", nullptr);
  Options o;
  o.library = dir.file("absent/libvendor.so");  // neither NVML nor Variorum can load
  o.root = dir.path();
  const Registry r = make_default_registry();
  Selection sel = select(r, o, "");
  EXPECT_EQ(sel.backend, "rapl");
  ASSERT_EQ(sel.skipped.size(), 2u);
  EXPECT_EQ(sel.skipped[0].rfind("nvml: ", 0), 0u) << sel.skipped[0];
  EXPECT_EQ(sel.skipped[1].rfind("variorum: ", 0), 0u) << sel.skipped[1];
  EXPECT_EQ(sel.session->channels().size(), 6u);

  o.root = dir.file("no-sysfs");
  try {
    select(r, o, "");
    FAIL();
  } catch (const SourceError& e) {
    const std::string what = e.what();
    const size_t a = what.find("nvml: "), b = what.find("variorum: "), c = what.find("rapl: ");
    EXPECT_TRUE(a != std::string::npos && a < b && b < c && c != std::string::npos) << what;
    EXPECT_EQ(what.find("replay: "), std::string::npos) << what;
  }
}

TEST(DefaultRegistry, ForcedReplayOpensTheRecording) {
  TempDir dir;
  testing::write_file(dir.file("r"), "# dooly-recording v1\nchannel,0,gpu,0,0,0,0,gpu0,x\ns,0,1,50\n");
  ScopedEnv file("DOOLY_REPLAY_FILE", dir.file("r").c_str());
  const Registry r = make_default_registry();
  Selection sel = select(r, Options{}, "replay");
  EXPECT_EQ(sel.backend, "replay");
  EXPECT_EQ(sel.session->channels().at(0).name, "gpu0");
  EXPECT_THROW(select(r, Options{}, "nvm1"), InputError);
}

}  // namespace
}  // namespace dooly::power
