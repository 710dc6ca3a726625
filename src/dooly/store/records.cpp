#include "dooly/store/records.hpp"

namespace dooly::store {

std::string_view to_string(SignatureKind kind) noexcept { return kind == SignatureKind::op ? "op" : "module"; }

std::string_view to_string(Phase phase) noexcept {
  switch (phase) {
    case Phase::prefill:
      return "prefill";
    case Phase::decode:
      return "decode";
    case Phase::mixed:
      return "mixed";
  }
  return "?";
}

std::string_view to_string(MeasurementStatus status) noexcept {
  switch (status) {
    case MeasurementStatus::ok:
      return "ok";
    case MeasurementStatus::failed:
      return "failed";
    case MeasurementStatus::oom:
      return "oom";
    case MeasurementStatus::timeout:
      return "timeout";
  }
  return "?";
}

std::string_view to_string(ResolutionStatus status) noexcept {
  switch (status) {
    case ResolutionStatus::runs:
      return "runs";
    case ResolutionStatus::absorbed:
      return "absorbed";
    case ResolutionStatus::unrunnable:
      return "unrunnable";
  }
  return "?";
}

std::optional<SignatureKind> parse_signature_kind(std::string_view text) noexcept {
  if (text == "op") return SignatureKind::op;
  if (text == "module") return SignatureKind::module;
  return std::nullopt;
}

std::optional<Phase> parse_phase(std::string_view text) noexcept {
  if (text == "prefill") return Phase::prefill;
  if (text == "decode") return Phase::decode;
  if (text == "mixed") return Phase::mixed;
  return std::nullopt;
}

std::optional<MeasurementStatus> parse_measurement_status(std::string_view text) noexcept {
  if (text == "ok") return MeasurementStatus::ok;
  if (text == "failed") return MeasurementStatus::failed;
  if (text == "oom") return MeasurementStatus::oom;
  if (text == "timeout") return MeasurementStatus::timeout;
  return std::nullopt;
}

std::optional<ResolutionStatus> parse_resolution_status(std::string_view text) noexcept {
  if (text == "runs") return ResolutionStatus::runs;
  if (text == "absorbed") return ResolutionStatus::absorbed;
  if (text == "unrunnable") return ResolutionStatus::unrunnable;
  return std::nullopt;
}

}  // namespace dooly::store
