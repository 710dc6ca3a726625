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

}  // namespace dooly::store
