#include "dooly/signature/canonical.hpp"

#include <fmt/format.h>

#include "dooly/signature/sha256.hpp"
#include "dooly/trace/layout.hpp"

namespace dooly::signature {

using nlohmann::json;

std::string dim_token(const trace::DimLabel& d) {
  if (taint::hashed_by_value(d.kind)) return d.value_form;
  // An UNKNOWN dim has no expression that says how it varies, so it is work of exactly this size: its value
  // is hashed with it (two ops on [1,T,16] and [1,T,32] built from data must never share a signature).
  if (d.kind == taint::Kind::unknown) return fmt::format("UNKNOWN:{}={}", d.value_form, d.value);
  return std::string(taint::to_string(d.kind)) + ":" + d.value_form;
}

std::string float_token(double v) { return fmt::format("{}", v); }

bool excluded_attribute(const std::string& name, const json& value) {
  if (name == "training") return true;
  if (name.find("layer_idx") != std::string::npos || name.find("layer_id") != std::string::npos ||
      name.find("layer_index") != std::string::npos || name == "idx" || name == "index")
    return true;
  return !(value.is_number() || value.is_boolean() || value.is_null());
}

std::string attrs_digest(const json& attrs) {
  json kept = json::object();
  for (const auto& [k, v] : attrs.items()) {
    if (excluded_attribute(k, v)) continue;
    kept[k] = v.is_number_float() ? json(float_token(v.get<double>())) : v;
  }
  if (kept.empty()) return "";
  return sha256_hex(kept.dump());
}

namespace {

json tensors(const std::vector<trace::TensorInfo>& ts) {
  json out = json::array();
  for (const auto& t : ts) {
    json dims = json::array();
    for (const auto& d : t.shape) dims.push_back(dim_token(d));
    json tensor{{"dtype", t.dtype}, {"shape", dims}};
    if (t.layout) {  // absent for contiguous tensors, whose canonical form is that of trace format 2
      std::vector<int64_t> sizes;
      for (const auto& d : t.shape) sizes.push_back(d.value);
      tensor["layout"] = trace::layout_token(sizes, *t.layout, trace::dtype_bytes(t.dtype));
    }
    out.push_back(std::move(tensor));
  }
  return out;
}

json scalar_value(const trace::Scalar& s) {
  if (s.label) return dim_token(*s.label);
  if (s.value.is_number_float()) return float_token(s.value.get<double>());
  return s.value;
}

}  // namespace

json canonical_op(const trace::OpRecord& op, const std::string& module_attrs_digest) {
  json scalars = json::array();
  for (const auto& s : op.scalars) scalars.push_back(json::array({s.arg, s.type, scalar_value(s)}));
  return json{
      {"attrs", module_attrs_digest},   {"inputs", tensors(op.inputs)}, {"kind", "op"},          {"name", op.op},
      {"outputs", tensors(op.outputs)}, {"scalars", scalars},           {"v", kSignatureVersion}};
}

json canonical_module(const std::string& cls, const std::string& module_attrs_digest,
                      const std::vector<std::string>& child_hashes) {
  return json{{"attrs", module_attrs_digest},
              {"children", child_hashes},
              {"kind", "module"},
              {"name", cls},
              {"v", kSignatureVersion}};
}

std::string serialize(const json& canonical) { return canonical.dump(); }

}  // namespace dooly::signature
