#include "dooly/store/records.hpp"

#include <array>

namespace dooly::store {
namespace {

// Each enum's words in the order of its enumerators: the one table both directions read.
constexpr std::array<std::string_view, 3> kSignatureKinds{"op", "module", "engine"};
constexpr std::array<std::string_view, 3> kPhases{"prefill", "decode", "mixed"};
constexpr std::array<std::string_view, measurement_status_count> kMeasurementStatuses{"ok", "failed", "oom", "timeout"};
constexpr std::array<std::string_view, 3> kResolutionStatuses{"runs", "absorbed", "unrunnable"};
constexpr std::array<std::string_view, 2> kPredictorTargets{"latency_s", "energy_j"};

template <typename E, size_t N>
std::string_view word(const std::array<std::string_view, N>& words, E e) noexcept {
  const auto i = static_cast<size_t>(e);
  return i < N ? words[i] : "?";
}

template <typename E, size_t N>
std::optional<E> parse(const std::array<std::string_view, N>& words, std::string_view text) noexcept {
  for (size_t i = 0; i < N; ++i)
    if (words[i] == text) return static_cast<E>(i);
  return std::nullopt;
}

}  // namespace

std::string_view to_string(SignatureKind kind) noexcept { return word(kSignatureKinds, kind); }
std::string_view to_string(Phase phase) noexcept { return word(kPhases, phase); }
std::string_view to_string(MeasurementStatus status) noexcept { return word(kMeasurementStatuses, status); }
std::string_view to_string(ResolutionStatus status) noexcept { return word(kResolutionStatuses, status); }
std::string_view to_string(PredictorTarget target) noexcept { return word(kPredictorTargets, target); }

std::optional<SignatureKind> parse_signature_kind(std::string_view text) noexcept {
  return parse<SignatureKind>(kSignatureKinds, text);
}
std::optional<Phase> parse_phase(std::string_view text) noexcept { return parse<Phase>(kPhases, text); }
std::optional<MeasurementStatus> parse_measurement_status(std::string_view text) noexcept {
  return parse<MeasurementStatus>(kMeasurementStatuses, text);
}
std::optional<ResolutionStatus> parse_resolution_status(std::string_view text) noexcept {
  return parse<ResolutionStatus>(kResolutionStatuses, text);
}
std::optional<PredictorTarget> parse_predictor_target(std::string_view text) noexcept {
  return parse<PredictorTarget>(kPredictorTargets, text);
}

}  // namespace dooly::store
