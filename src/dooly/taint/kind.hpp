#pragma once
// Taint kinds: where a dimension or integer came from (docs/dooly-tracing.md, "Taint kinds").
#include <cstdint>
#include <string_view>

namespace dooly::taint {

enum class Kind : uint8_t {
  none,          // an untainted constant (a literal in the model code)
  model_config,  // derived only from model configuration (and constants)
  num_toks,      // tokens scheduled this step
  num_reqs,      // requests scheduled this step
  max_num_toks,  // the engine's limit on batch tokens (becomes num_toks when it bounds a slice)
  max_num_reqs,  // the engine's limit on batch requests (becomes num_reqs when it bounds a slice)
  mix,           // a combination of at least two of: config, tokens, requests
  unknown,       // no rule could classify it; always counted and reported
};

inline constexpr Kind kAllKinds[] = {Kind::none,         Kind::model_config, Kind::num_toks, Kind::num_reqs,
                                     Kind::max_num_toks, Kind::max_num_reqs, Kind::mix,      Kind::unknown};

// Upper-case name as written in traces: NONE, MODEL_CONFIG, NUM_TOKS, NUM_REQS, MAX_NUM_TOKS, ...
std::string_view to_string(Kind k) noexcept;
// Inverse of to_string; throws InputError naming the text.
Kind kind_from_string(std::string_view s);

// The combination table: the kind of a value computed from values of kinds a and b. Commutative,
// associative and idempotent (a join in a small lattice; see kind.cpp).
Kind combine(Kind a, Kind b) noexcept;

// A limit used as a slice bound becomes the quantity it bounds (MAX_NUM_TOKS -> NUM_TOKS).
Kind bound_by(Kind k) noexcept;

// True for kinds whose value changes with the requests of a step (NUM_*, MIX); limits are fixed per engine.
bool varies_with_requests(Kind k) noexcept;
// True for kinds a signature hashes by value (NONE, MODEL_CONFIG); the rest are hashed by expression.
bool hashed_by_value(Kind k) noexcept;

}  // namespace dooly::taint
