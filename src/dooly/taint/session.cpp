#include "dooly/taint/session.hpp"

#include <optional>

#include "dooly/common/error.hpp"

namespace dooly::taint {

using nlohmann::json;

Session::Session() : Session(default_rules()) {}
Session::Session(RuleRegistry rules) : rules_(std::move(rules)) {}

int64_t Session::intern(ExprPtr e) {
  labels_.push_back(std::move(e));
  return static_cast<int64_t>(labels_.size()) - 1;
}

int64_t Session::sym(const std::string& name, Kind kind, int64_t value) {
  return intern(taint::sym(name, kind, value));
}
int64_t Session::constant(int64_t value) { return intern(taint::constant(value)); }
int64_t Session::unknown(int64_t value, const std::string& why) { return intern(taint::unknown(value, why)); }
int64_t Session::derived(const std::string& name, Kind kind, int64_t value, const std::vector<int64_t>& args) {
  std::vector<ExprPtr> labels;
  labels.reserve(args.size());
  for (int64_t a : args) labels.push_back(label(a));
  return intern(taint::func(name, std::move(labels), value, kind));
}
int64_t Session::binary(const std::string& op, int64_t a, int64_t b) {
  return intern(apply_binary(op, label(a), label(b)));
}
int64_t Session::unary(const std::string& op, int64_t a) { return intern(apply_unary(op, label(a))); }

const ExprPtr& Session::label(int64_t id) const {
  if (id < 0 || id >= static_cast<int64_t>(labels_.size()))
    DOOLY_THROW(InputError, "pass label ids returned by this session", "label id {} does not exist (session holds {})",
                id, labels_.size());
  return labels_[static_cast<size_t>(id)];
}

json Session::describe(int64_t id) const {
  const ExprPtr& e = label(id);
  return json{
      {"v", e->value()}, {"k", std::string(to_string(e->kind()))}, {"e", e->text()}, {"f", value_form(e)->text()}};
}

namespace {

[[noreturn]] void undecodable(const json& j) {
  DOOLY_THROW(InputError, "encode values as documented in docs/dooly-tracing.md", "cannot decode value {}", j.dump());
}

// JSON scalars carry no label, so they decode without the session; nullopt for arrays and objects.
std::optional<Value> decode_scalar(const json& j) {
  Value v;
  if (j.is_null()) return v;
  if (j.is_boolean()) {
    v.type = Value::Type::boolean;
    v.boolean = j.get<bool>();
    return v;
  }
  if (j.is_number_integer()) return Value::make_int(taint::constant(j.get<int64_t>()));
  if (j.is_number()) {
    v.type = Value::Type::real;
    v.real = j.get<double>();
    return v;
  }
  if (j.is_string()) {
    v.type = Value::Type::string;
    v.text = j.get<std::string>();
    return v;
  }
  return std::nullopt;
}

// {"ellipsis": ...} and {"other": "<type>"}: placeholders the rules only look at by type.
std::optional<Value> decode_marker(const json& j) {
  Value v;
  if (j.contains("ellipsis")) {
    v.type = Value::Type::ellipsis;
    return v;
  }
  if (j.contains("other")) {
    v.type = Value::Type::other;
    v.text = j.at("other").get<std::string>();
    return v;
  }
  return std::nullopt;
}

template <class DecodeItem>
Value decode_items(const json& items, Value::Type type, DecodeItem&& decode_item) {
  Value v;
  v.type = type;
  v.items.reserve(items.size());
  for (const auto& item : items) v.items.push_back(decode_item(item));
  return v;
}

// {"i": value, "l": label id}: a label whose value differs means the adapter mixed up its ids.
Value decode_int(const json& j, const Session& s) {
  const int64_t value = j.at("i").get<int64_t>();
  if (!j.contains("l") || j.at("l").is_null()) return Value::make_int(taint::constant(value));
  const ExprPtr& l = s.label(j.at("l").get<int64_t>());
  if (l->value() != value)
    DOOLY_THROW(InputError, "the adapter must send the label that belongs to the integer",
                "integer {} carries label '{}' whose value is {}", value, l->text(), l->value());
  return Value::make_int(l);
}

// The label of input dim d, or nullptr when the adapter sent none that fits. Observed outputs are never
// taken from the adapter's labels: the rules predict those.
ExprPtr input_dim_label(const Session& s, const json* ids, size_t d, int64_t size, bool observed) {
  if (observed || !ids || d >= ids->size() || (*ids)[d].is_null()) return nullptr;
  const ExprPtr& l = s.label((*ids)[d].get<int64_t>());
  return l->value() == size ? l : nullptr;
}

// {"s": sizes, "t": label ids, "d": dtype}; counts the input dims left unlabelled into `unlabelled`.
Value decode_tensor(const json& j, const Session& s, bool observed, int64_t& unlabelled) {
  const auto& sizes = j.at("s");
  const json* ids = j.contains("t") ? &j.at("t") : nullptr;
  std::vector<ExprPtr> dims;
  dims.reserve(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    const int64_t size = sizes[d].get<int64_t>();
    if (ExprPtr l = input_dim_label(s, ids, d, size, observed)) {
      dims.push_back(std::move(l));
      continue;
    }
    if (!observed) ++unlabelled;
    dims.push_back(taint::unknown(size, "UNLABELLED"));
  }
  return Value::make_tensor(std::move(dims), j.value("d", ""));
}

}  // namespace

Value Session::decode(const json& j, bool observed) {
  if (auto v = decode_scalar(j)) return *std::move(v);
  if (j.is_array()) return decode_items(j, Value::Type::list, [&](const json& item) { return decode(item, observed); });
  if (!j.is_object()) undecodable(j);
  if (j.contains("i")) return decode_int(j, *this);
  if (j.contains("s")) return decode_tensor(j, *this, observed, counters_.unlabelled_inputs);
  if (j.contains("tuple")) {
    Value v = decode(j.at("tuple"), observed);
    v.text = "tuple";
    return v;
  }
  if (j.contains("slice")) {
    Value v = decode_items(j.at("slice"), Value::Type::slice, [&](const json& item) { return decode(item); });
    if (v.items.size() != 3)
      DOOLY_THROW(InputError, "send slices as [start, stop, step]", "slice with {} parts", v.items.size());
    return v;
  }
  if (auto v = decode_marker(j)) return *std::move(v);
  undecodable(j);
}

json Session::encode(const Value& v) {
  if (v.is_tensor()) {
    json ids = json::array();
    for (const auto& d : v.dims) ids.push_back(intern(d));
    return json{{"t", ids}};
  }
  if (v.is_int()) return json{{"i", v.int_value()}, {"l", intern(v.label)}};
  return nullptr;
}

json Session::propagate(const json& call) {
  OpCall c;
  c.op = normalize_op_name(call.at("op").get<std::string>());
  if (call.contains("args"))
    for (const auto& a : call.at("args")) c.args.push_back(decode(a));
  if (call.contains("kwargs"))
    for (const auto& [k, a] : call.at("kwargs").items()) c.kwargs.emplace_back(k, decode(a));
  if (call.contains("outputs"))
    for (const auto& o : call.at("outputs")) {
      c.outputs.push_back(decode(o, /*observed=*/true));
    }
  OpResult r = taint::propagate(rules_, c);
  ++counters_.ops;
  counters_.fallback_ops += r.coverage == Coverage::fallback;
  counters_.unknown_dims += r.unknown_dims;
  counters_.ambiguous += r.ambiguous;
  counters_.conflicts += r.conflicts;
  json outs = json::array();
  for (const auto& o : r.outputs) outs.push_back(encode(o));
  return json{{"op", c.op},
              {"outputs", outs},
              {"rule", r.rule_class},
              {"coverage", r.coverage == Coverage::rule ? "rule" : "fallback"},
              {"notes", r.notes},
              {"unknown_dims", r.unknown_dims},
              {"ambiguous", r.ambiguous},
              {"conflicts", r.conflicts}};
}

}  // namespace dooly::taint
