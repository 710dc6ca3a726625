#include "dooly/power/nvml/nvml_provider.hpp"

#include <fmt/format.h>

#include "dooly/common/error.hpp"
#include "dooly/power/nvml/nvml_library.hpp"
#include "dooly/power/nvml/nvml_session.hpp"

namespace dooly::power {

namespace {

class NvmlProvider final : public Provider {
 public:
  std::string_view name() const noexcept override { return "nvml"; }
  std::string_view description() const noexcept override {
    return "NVIDIA GPUs through NVML (libnvidia-ml.so.1): driver sample buffer, instant field or 1 s average";
  }

  Probe probe(const Options& options) const override {
    try {
      nvml::Library lib(options.library);
      unsigned count = 0;
      if (nvml::Return rc = lib.api().device_get_count_v2(&count); rc != nvml::kSuccess)
        return {false, lib.error(rc, "nvmlDeviceGetCount_v2", "listing GPUs").what()};
      if (count == 0)
        return {false, fmt::format("NVML ({}) sees no GPU — check `nvidia-smi -L`, or choose another power source "
                                   "with DOOLY_POWER_SOURCE",
                                   lib.file())};
      return {true, fmt::format("{} GPU(s) through {}", count, lib.file())};
    } catch (const Error& e) {
      return {false, e.what()};
    }
  }

  std::unique_ptr<Session> open(const Options& options) const override {
    return std::make_unique<nvml::NvmlSession>(options);
  }
};

}  // namespace

std::unique_ptr<Provider> make_nvml_provider() { return std::make_unique<NvmlProvider>(); }

}  // namespace dooly::power
