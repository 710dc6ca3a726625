#include "dooly/power/nvml/nvml_session.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>

#include <fmt/format.h>

#include "dooly/common/env.hpp"
#include "dooly/common/error.hpp"
#include "dooly/common/log.hpp"
#include "dooly/power/nvml/cuda_devices.hpp"

namespace dooly::power::nvml {

namespace {

constexpr int64_t kMs = 1'000'000;
// The first poll in samples mode also returns this much of the driver's backlog from before open, so a
// window that starts right at open can be interpolated.
constexpr unsigned long long kBacklogUs = 1'000'000;
constexpr size_t kMinSampleBuffer = 128;
constexpr size_t kMaxSampleBuffer = 1 << 16;

double value_as_double(int type, const Value& v) noexcept {
  switch (type) {
    case kValueDouble:
      return v.dVal;
    case kValueUnsignedInt:
      return static_cast<double>(v.uiVal);
    case kValueUnsignedLong:
      return static_cast<double>(v.ulVal);
    case kValueUnsignedLongLong:
      return static_cast<double>(v.ullVal);
    case kValueSignedLongLong:
      return static_cast<double>(v.sllVal);
    case kValueSignedInt:
      return static_cast<double>(v.siVal);
    case kValueUnsignedShort:
      return static_cast<double>(v.usVal);
    default:
      return static_cast<double>(v.uiVal);
  }
}

struct Target {
  int ordinal = 0;
  Device handle = nullptr;
  std::string pci_bus_id;
};

// Ordinals count after CUDA_VISIBLE_DEVICES: reject those out of range or listed twice before opening any GPU.
void check_ordinals(const std::vector<int>& ordinals, size_t visible) {
  for (size_t i = 0; i < ordinals.size(); ++i) {
    const int o = ordinals[i];
    if (o < 0 || static_cast<size_t>(o) >= visible)
      DOOLY_THROW(InputError,
                  fmt::format("ask for CUDA devices 0..{} (ordinals count after CUDA_VISIBLE_DEVICES)", visible - 1),
                  "CUDA device {} does not exist: {} GPU(s) are visible to CUDA", o, visible);
    if (std::count(ordinals.begin(), ordinals.end(), o) > 1)
      DOOLY_THROW(InputError, "list each GPU once", "CUDA device {} is requested twice", o);
  }
}

// With libcuda's PCI bus ids the handle is exact; without, CUDA_VISIBLE_DEVICES was mapped to NVML indices.
Target open_target(const Library& lib, int o, const CudaDevices& cuda, const std::vector<unsigned>& index_map) {
  const Api& api = lib.api();
  Target t;
  t.ordinal = o;
  if (cuda.from_libcuda) {
    t.pci_bus_id = cuda.pci_bus_ids[static_cast<size_t>(o)];
    if (Return rc = api.device_get_handle_by_pci_bus_id_v2(t.pci_bus_id.c_str(), &t.handle); rc != kSuccess)
      throw lib.error(rc, "nvmlDeviceGetHandleByPciBusId_v2", fmt::format("CUDA device {} (PCI {})", o, t.pci_bus_id));
    return t;
  }
  const unsigned index = index_map[static_cast<size_t>(o)];
  if (Return rc = api.device_get_handle_by_index_v2(index, &t.handle); rc != kSuccess)
    throw lib.error(rc, "nvmlDeviceGetHandleByIndex_v2", fmt::format("CUDA device {} (NVML {})", o, index));
  PciInfo pci{};
  if (api.device_get_pci_info_v3 && api.device_get_pci_info_v3(t.handle, &pci) == kSuccess) {
    pci.busId[sizeof pci.busId - 1] = '\0';
    t.pci_bus_id = pci.busId;
  }
  return t;
}

std::vector<Target> select_targets(const Library& lib, const std::vector<int>& wanted, bool inside_cuda_init) {
  const Api& api = lib.api();
  unsigned nvml_count = 0;
  if (Return rc = api.device_get_count_v2(&nvml_count); rc != kSuccess)
    throw lib.error(rc, "nvmlDeviceGetCount_v2", "listing GPUs");

  CudaDevices cuda;
  if (inside_cuda_init)
    cuda.why_not = "opened inside cuInit (a CUDA injection), where the driver cannot be asked";
  else
    cuda = list_cuda_devices();
  if (cuda.from_libcuda && !api.device_get_handle_by_pci_bus_id_v2) {
    cuda = CudaDevices{};
    cuda.why_not = fmt::format("{} lacks nvmlDeviceGetHandleByPciBusId_v2", lib.file());
  }
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  std::vector<unsigned> index_map;
  size_t visible = 0;
  if (cuda.from_libcuda) {
    visible = cuda.pci_bus_ids.size();
  } else {
    std::string note;
    index_map = ordinals_to_nvml_indices(nvml_count, cvd, note);
    if (inside_cuda_init)
      log::info("nvml: {}; {}", cuda.why_not, note);
    else
      log::warn("nvml: {}; {}", cuda.why_not, note);
    visible = index_map.size();
  }
  if (visible == 0)
    throw SourceError("nvml", 0,
                      fmt::format("no GPU is visible to CUDA (CUDA_VISIBLE_DEVICES='{}'; NVML sees {} GPU(s))",
                                  cvd ? cvd : "<unset>", nvml_count),
                      "fix or unset CUDA_VISIBLE_DEVICES, or choose another power source with DOOLY_POWER_SOURCE");

  std::vector<int> ordinals = wanted;
  if (ordinals.empty())
    for (size_t i = 0; i < visible; ++i) ordinals.push_back(static_cast<int>(i));
  check_ordinals(ordinals, visible);

  std::vector<Target> targets;
  targets.reserve(ordinals.size());
  for (int o : ordinals) targets.push_back(open_target(lib, o, cuda, index_map));
  return targets;
}

// The driver returns samples unordered and may repeat ones already seen: hand on only the newer ones, oldest
// first. Returns the newest stamp seen (last_seen_us if none is newer).
template <class EmitSample>
unsigned long long emit_fresh_samples(std::vector<Sample>& buffer, unsigned n, unsigned long long last_seen_us,
                                      EmitSample&& emit_sample) {
  std::sort(buffer.begin(), buffer.begin() + n,
            [](const Sample& a, const Sample& b) { return a.timeStamp < b.timeStamp; });
  unsigned long long newest = last_seen_us;
  for (unsigned k = 0; k < n; ++k) {
    const Sample& smp = buffer[k];
    if (smp.timeStamp <= last_seen_us) continue;
    emit_sample(smp);
    newest = std::max(newest, smp.timeStamp);
  }
  return newest;
}

}  // namespace

std::string_view to_string(Mode m) noexcept {
  switch (m) {
    case Mode::samples:
      return "samples";
    case Mode::instant:
      return "instant";
    case Mode::average:
      return "average";
  }
  return "?";
}

std::optional<Mode> forced_mode_from_env() {
  auto v = env::get("DOOLY_NVML_MODE");
  if (!v) return std::nullopt;
  for (Mode m : {Mode::samples, Mode::instant, Mode::average})
    if (*v == to_string(m)) return m;
  DOOLY_THROW(InputError, "set DOOLY_NVML_MODE to samples, instant or average, or unset it to let dooly choose",
              "DOOLY_NVML_MODE='{}' is not an NVML read mode", *v);
}

SensorModel sensor_model(Mode m) {
  SensorModel s;
  switch (m) {
    case Mode::samples:
      // A sample every ~20 ms. Its effective window (the sensor's own averaging plus how far its stamp can
      // be from the power it reports) was fitted on an H200 (driver 580.159.04): the model-mode residual of a
      // run alternating 2.6 ms and 3.1 ms kernels fell from 23 W at 0 ms to 6.4 W at 25 ms with a 4 ms lag
      // (docs/results/2026-11-30-h200-sensor-window.md). Override: DOOLY_SENSOR_WINDOW_MS / _DELAY_MS.
      s.window_ns = 25 * kMs;
      s.delay_ns = 4 * kMs;
      s.update_ns = 20 * kMs;
      s.description = "nvmlDeviceGetSamples (~20 ms, effective window 25 ms)";
      break;
    case Mode::instant:
      // Yang et al. (SC24) measured the A100/H100 instant reading as a ~25 ms average refreshed every 100 ms.
      s.window_ns = 25 * kMs;
      s.update_ns = 100 * kMs;
      s.description = "NVML field 186 POWER_INSTANT (~25 ms average, updates every ~100 ms)";
      break;
    case Mode::average:
      s.window_ns = 1000 * kMs;
      s.update_ns = 100 * kMs;
      s.description = "nvmlDeviceGetPowerUsage (1-second average, updates every ~100 ms)";
      break;
  }
  return s;
}

NvmlSession::NvmlSession(const Options& options) {
  const std::optional<Mode> forced = forced_mode_from_env();
  lib_ = std::make_unique<Library>(options.library);
  const Api& api = lib_->api();
  const std::vector<Target> targets = select_targets(*lib_, options.cuda_devices, options.inside_cuda_init);
  const unsigned long long open_wall_us = static_cast<unsigned long long>(wall_now_us());

  energy_counter_ = api.device_get_total_energy_consumption != nullptr;
  for (const Target& t : targets) {
    const std::string subject = fmt::format("gpu{}", t.ordinal);
    char name[kDeviceNameBufferSize] = {};
    if (Return rc = api.device_get_name(t.handle, name, sizeof name); rc != kSuccess)
      throw lib_->error(rc, "nvmlDeviceGetName", subject);
    name[sizeof name - 1] = '\0';

    Gpu gpu;
    gpu.handle = t.handle;
    gpu.mode = choose_mode(gpu, subject, forced);
    if (gpu.mode == Mode::samples)
      if (Return rc = size_sample_buffer(gpu); rc != kSuccess) throw lib_->error(rc, "nvmlDeviceGetSamples", subject);
    gpu.last_seen_us = open_wall_us > kBacklogUs ? open_wall_us - kBacklogUs : 0;

    if (energy_counter_) {
      unsigned long long mj = 0;
      const Return rc = api.device_get_total_energy_consumption(t.handle, &mj);
      if (rc != kSuccess) {
        energy_counter_ = false;
        log::debug("nvml: {}: no energy counter: {}", subject, describe(rc, lib_->vendor_string(rc)));
      }
    }

    Channel ch;
    ch.name = subject;
    ch.domain = Domain::gpu;
    ch.device = t.ordinal;
    ch.sensor = sensor_model(gpu.mode);
    ch.sensor.description =
        fmt::format("{} [PCI {}]: {}", name, t.pci_bus_id.empty() ? "?" : t.pci_bus_id, ch.sensor.description);
    channels_.push_back(std::move(ch));
    gpus_.push_back(std::move(gpu));
  }
  last_t_ns_.assign(channels_.size(), INT64_MIN);
}

NvmlSession::~NvmlSession() = default;

Return NvmlSession::probe_mode(const Gpu& gpu, Mode m) const noexcept {
  const Api& api = lib_->api();
  switch (m) {
    case Mode::samples: {
      if (!api.device_get_samples) return kErrorNotSupported;
      int type = 0;
      unsigned count = 0;
      const Return rc = api.device_get_samples(gpu.handle, kTotalPowerSamples, 0, &type, &count, nullptr);
      return rc == kErrorNotFound ? kSuccess : rc;  // NOT_FOUND: supported, nothing buffered yet
    }
    case Mode::instant: {
      if (!api.device_get_field_values) return kErrorNotSupported;
      FieldValue fv{};
      fv.fieldId = kFieldPowerInstant;
      const Return rc = api.device_get_field_values(gpu.handle, 1, &fv);
      return rc != kSuccess ? rc : fv.nvmlReturn;
    }
    case Mode::average: {
      unsigned mw = 0;
      return api.device_get_power_usage(gpu.handle, &mw);
    }
  }
  return kErrorNotSupported;
}

Mode NvmlSession::choose_mode(Gpu& gpu, const std::string& subject, std::optional<Mode> forced) const {
  std::vector<Mode> order = {Mode::samples, Mode::instant, Mode::average};
  if (forced) order = {*forced};
  std::string tried;
  for (Mode m : order) {
    const Return rc = probe_mode(gpu, m);
    if (rc == kSuccess) {
      if (!tried.empty()) log::info("nvml: {}: {}; reading '{}'", subject, tried, to_string(m));
      return m;
    }
    if (rc != kErrorNotSupported)
      throw lib_->error(rc, fmt::format("probing the '{}' read mode", to_string(m)), subject);
    tried += fmt::format("{}'{}' not supported", tried.empty() ? "" : ", ", to_string(m));
  }
  if (forced)
    throw SourceError("nvml", kErrorNotSupported,
                      fmt::format("{}: DOOLY_NVML_MODE={} is not supported by this GPU", subject, to_string(*forced)),
                      "unset DOOLY_NVML_MODE to let dooly choose a mode the GPU supports");
  throw SourceError("nvml", kErrorNotSupported, fmt::format("{}: no power reading is supported ({})", subject, tried),
                    "this GPU has no power sensor NVML can read; measure host power with DOOLY_POWER_SOURCE=rapl "
                    "or variorum");
}

Return NvmlSession::size_sample_buffer(Gpu& gpu) const {
  int type = 0;
  unsigned count = 0;
  const Return rc = lib_->api().device_get_samples(gpu.handle, kTotalPowerSamples, 0, &type, &count, nullptr);
  if (rc != kSuccess && rc != kErrorNotFound) return rc;
  const size_t want =
      std::min<size_t>(kMaxSampleBuffer, std::max<size_t>(count, kMinSampleBuffer) + gpu.buffer.size() / 2);
  if (gpu.buffer.size() < want) gpu.buffer.resize(want);
  return kSuccess;
}

void NvmlSession::emit(std::vector<Reading>& out, uint32_t channel, int64_t t_ns, double power_w) {
  if (t_ns <= last_t_ns_[channel]) return;  // duplicate or stale
  last_t_ns_[channel] = t_ns;
  Reading r;
  r.channel = channel;
  r.t_ns = t_ns;
  r.power_w = power_w;
  out.push_back(r);
}

Return NvmlSession::read(uint32_t i, std::vector<Reading>& out, const char*& call) {
  const Api& api = lib_->api();
  Gpu& g = gpus_[i];
  switch (g.mode) {
    case Mode::samples: {
      // One call returns every sample newer than last_seen. The buffer was sized at open by the null-buffer
      // call, which reports the driver's capacity (120 on driver 580); grow it if the driver ever asks for more.
      call = "nvmlDeviceGetSamples";
      int type = 0;
      for (int attempt = 0; attempt < 2; ++attempt) {
        unsigned n = static_cast<unsigned>(g.buffer.size());
        Return rc = api.device_get_samples(g.handle, kTotalPowerSamples, g.last_seen_us, &type, &n, g.buffer.data());
        if (rc == kErrorNotFound) return kSuccess;  // nothing new since last time
        if (rc == kErrorInsufficientSize) {
          if (Return rc2 = size_sample_buffer(g); rc2 != kSuccess) return rc2;
          continue;
        }
        if (rc != kSuccess) return rc;
        n = std::min<unsigned>(n, static_cast<unsigned>(g.buffer.size()));
        g.last_seen_us = emit_fresh_samples(g.buffer, n, g.last_seen_us, [&](const Sample& smp) {
          emit(out, i, clock_.steady_ns(static_cast<int64_t>(smp.timeStamp)),
               value_as_double(type, smp.sampleValue) / 1000.0);
        });
        return kSuccess;
      }
      return kErrorInsufficientSize;
    }
    case Mode::instant: {
      call = "nvmlDeviceGetFieldValues(NVML_FI_DEV_POWER_INSTANT)";
      FieldValue fv{};
      fv.fieldId = kFieldPowerInstant;
      Return rc = api.device_get_field_values(g.handle, 1, &fv);
      if (rc != kSuccess) return rc;
      if (fv.nvmlReturn != kSuccess) return fv.nvmlReturn;
      if (fv.timestamp == g.last_field_us) return kSuccess;  // the sensor has not refreshed
      g.last_field_us = fv.timestamp;
      emit(out, i, clock_.steady_ns(fv.timestamp), value_as_double(fv.valueType, fv.value) / 1000.0);
      return kSuccess;
    }
    case Mode::average: {
      call = "nvmlDeviceGetPowerUsage";
      unsigned mw = 0;
      Return rc = api.device_get_power_usage(g.handle, &mw);
      if (rc != kSuccess) return rc;
      emit(out, i, now_ns(), mw / 1000.0);
      return kSuccess;
    }
  }
  return kSuccess;
}

PollStatus NvmlSession::poll(std::vector<Reading>& out) noexcept {
  PollStatus status;
  if (fatal_) {
    status.ok = false;
    status.fatal = true;
    status.message = fatal_message_;
    return status;
  }
  try {
    for (uint32_t i = 0; i < gpus_.size(); ++i) {
      const char* call = "";
      const Return rc = read(i, out, call);
      if (rc == kSuccess) continue;
      const ErrorInfo info = error_info(rc);
      std::string msg = fmt::format("nvml: {}: {} failed: {} — {}", channels_[i].name, call,
                                    describe(rc, lib_->vendor_string(rc)), info.fix);
      status.ok = false;
      if (is_fatal(rc)) {
        fatal_ = true;
        lost_ = true;
        fatal_message_ = msg;
        status.fatal = true;
        status.message = std::move(msg);
        return status;
      }
      status.message += (status.message.empty() ? "" : "; ") + msg;
    }
  } catch (...) {  // allocation failure: report, never throw out of poll
    status.ok = false;
    status.message = "nvml: out of memory while reading power samples";
  }
  return status;
}

std::optional<double> NvmlSession::energy_counter_j(uint32_t channel) noexcept {
  if (!energy_counter_ || channel >= gpus_.size() || lost_) return std::nullopt;
  unsigned long long mj = 0;
  const Return rc = lib_->api().device_get_total_energy_consumption(gpus_[channel].handle, &mj);
  if (rc != kSuccess) {
    log::debug("nvml: {}: nvmlDeviceGetTotalEnergyConsumption failed: {}", channels_[channel].name,
               describe(rc, lib_->vendor_string(rc)));
    return std::nullopt;
  }
  return static_cast<double>(mj) / 1000.0;
}

}  // namespace dooly::power::nvml
