#pragma once
// The canonical serialization a signature hashes (format "dooly-signature" version 1; byte-for-byte in
// docs/dooly-tracing.md, "Signatures"). It is compact JSON with keys in byte order, so the stored text is
// the exact hashed bytes.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dooly/trace/trace.hpp"

namespace dooly::signature {

inline constexpr int kSignatureVersion = 1;

// A dimension or integer as hashed: NONE/MODEL_CONFIG -> its value form (the decimal value, or an index
// name such as "layer_idx"); request-side kinds -> "KIND:value_form", e.g. "MIX:128*NUM_TOKS"; UNKNOWN ->
// "UNKNOWN:value_form=value", e.g. "UNKNOWN:DATA=16" (no expression says how it varies: fixed work).
std::string dim_token(const trace::DimLabel& d);
// A float as hashed: the shortest text that reads back to the same double (fmt's "{}"), e.g. "1e-06".
std::string float_token(double v);

// True for module attributes the digest leaves out: training flags, layer indices, and non-primitive or
// string values.
bool excluded_attribute(const std::string& name, const nlohmann::json& value);
// SHA-256 of the canonical JSON of the remaining attributes; "" when none remain.
std::string attrs_digest(const nlohmann::json& attrs);

nlohmann::json canonical_op(const trace::OpRecord& op, const std::string& module_attrs_digest);
nlohmann::json canonical_module(const std::string& cls, const std::string& module_attrs_digest,
                                const std::vector<std::string>& child_hashes);
// The exact bytes: nlohmann::json::dump() of the canonical object (no whitespace, keys sorted).
std::string serialize(const nlohmann::json& canonical);

}  // namespace dooly::signature
