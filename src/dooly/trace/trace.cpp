#include "dooly/trace/trace.hpp"

#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <type_traits>

#include "dooly/common/error.hpp"
#include "dooly/common/json_int.hpp"

namespace dooly::trace {

using nlohmann::json;

namespace {

constexpr const char* kFix = "re-create the trace with `dooly trace`";

// An integer field: a JSON integer that fits T (json_integer), never a cast of a float.
template <typename T>
T checked_integer(const json& v, const char* key, const std::string& where) {
  const std::optional<T> i = json_integer<T>(v);
  if (!i)
    DOOLY_THROW(InputError, kFix, "{}: field '{}' has the wrong type: an integer in [{}, {}], not {}", where, key,
                std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), v.dump(-1, ' ', true).substr(0, 40));
  return *i;
}

// The member `key` of object `j`, read in place (a trace's arrays are most of its size: a copy per step or per op
// doubled the time of reading one); missing is an error naming the field.
const json& member(const json& j, const char* key, const std::string& where) {
  const auto it = j.is_object() ? j.find(key) : j.end();
  if (it == j.end()) DOOLY_THROW(InputError, kFix, "{}: missing field '{}'", where, key);
  return *it;
}

template <typename T>
T field(const json& j, const char* key, const std::string& where) {
  const json& v = member(j, key, where);
  if constexpr (std::is_integral_v<T>) {
    return checked_integer<T>(v, key, where);
  } else {
    try {
      return v.get<T>();
    } catch (const json::exception& e) {
      DOOLY_THROW(InputError, kFix, "{}: field '{}' has the wrong type ({})", where, key, e.what());
    }
  }
}

// The optional member `key` of object `j`, read in place: an empty array when absent (iterating it reads nothing).
// A `j` that is not an object is an error, as json::value() made it.
const json& optional_member(const json& j, const char* key, const std::string& where) {
  static const json kNone = json::array();
  if (!j.is_object()) DOOLY_THROW(InputError, kFix, "{}: expected an object, not {}", where, j.type_name());
  const auto it = j.find(key);
  return it == j.end() ? kNone : *it;
}

// An optional integer field: `fallback` when absent, checked like field<int64_t> when present.
int64_t optional_integer(const json& j, const char* key, int64_t fallback, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) return fallback;
  return checked_integer<int64_t>(j.at(key), key, where);
}

TensorInfo parse_tensor(const json& j, const std::string& where) {
  TensorInfo t;
  t.dtype = j.value("dtype", "");
  for (const auto& d : j.at("shape")) t.shape.push_back(parse_dim(d));
  if (j.contains("strides")) {
    Layout l;
    for (const auto& s : member(j, "strides", where))
      l.strides.push_back(checked_integer<int64_t>(s, "strides", where));
    l.offset = optional_integer(j, "offset", 0, where);
    std::vector<int64_t> sizes;
    for (const auto& d : t.shape) sizes.push_back(d.value);
    try {
      (void)layout_token(sizes, l, dtype_bytes(t.dtype));  // rank and signs, checked here once, naming the file
    } catch (const InputError& e) {
      throw InputError(where + ": " + e.problem(), e.fix());
    }
    t.layout = std::move(l);
  }
  return t;
}

OpRecord parse_op(const json& j, const std::string& where) {
  OpRecord r;
  r.seq = field<int64_t>(j, "seq", where);
  r.call = optional_integer(j, "call", -1, where);
  r.op = field<std::string>(j, "op", where);
  r.module = j.value("module", "");
  for (const auto& t : optional_member(j, "inputs", where)) r.inputs.push_back(parse_tensor(t, where));
  for (const auto& t : optional_member(j, "outputs", where)) r.outputs.push_back(parse_tensor(t, where));
  for (const auto& s : optional_member(j, "scalars", where)) {
    Scalar sc;
    sc.arg = field<std::string>(s, "arg", where);
    sc.type = field<std::string>(s, "type", where);
    sc.value = s.value("value", json());
    if (s.contains("label")) sc.label = parse_dim(s.at("label"));
    r.scalars.push_back(std::move(sc));
  }
  r.rule = j.value("rule", "");
  r.coverage = j.value("coverage", "rule");
  r.notes = j.value("notes", std::vector<std::string>{});
  r.kernels = j.value("kernels", std::vector<std::string>{});
  return r;
}

}  // namespace

DimLabel parse_dim(const json& j) {
  DimLabel d;
  d.value = field<int64_t>(j, "v", "dimension");
  d.kind = taint::kind_from_string(field<std::string>(j, "k", "dimension"));
  d.expr = field<std::string>(j, "e", "dimension");
  d.value_form = j.value("f", d.expr);
  return d;
}

namespace {
Trace parse_trace_fields(const json& j, const std::string& origin);
}  // namespace

Trace parse_trace(const json& j, const std::string& origin) {
  // Optional fields are read with json::value and at(), which throw json's own errors for a wrong type or a
  // missing key deeper down; those are bad input too, reported as such (found by fuzzing).
  try {
    return parse_trace_fields(j, origin);
  } catch (const json::exception& e) {
    DOOLY_THROW(InputError, kFix, "{}: a field has the wrong type or is missing ({})", origin, e.what());
  }
}

namespace {
Trace parse_trace_fields(const json& j, const std::string& origin) {
  if (!j.is_object() || !j.contains("version"))
    DOOLY_THROW(InputError, "pass a trace written by `dooly trace`", "{}: not a dooly trace (no 'version' key)",
                origin);
  Trace t;
  t.version = field<int>(j, "version", origin);
  if (t.version != kTraceFormatVersion)
    DOOLY_THROW(InputError,
                t.version < kTraceFormatVersion
                    ? "re-create it with this build's `dooly trace` (same flags): signatures of another format do not "
                      "match this one's"
                    : "read it with the dooly build that wrote it, or upgrade this one",
                "{}: trace format version {} is not supported (this build reads version {})", origin, t.version,
                kTraceFormatVersion);
  t.model = field<std::string>(j, "model", origin);
  t.family = j.value("family", "");
  t.architecture = j.value("architecture", "");
  t.config_hash = field<std::string>(j, "config_hash", origin);
  t.attention = field<std::string>(j, "attention", origin);
  if (j.contains("sdpa_kernel") && j.at("sdpa_kernel").is_string())
    t.sdpa_kernel = j.at("sdpa_kernel").get<std::string>();
  t.dtype = j.value("dtype", "");
  t.device = j.value("device", "");
  t.engine_info = j.value("engine_info", json::object());
  t.limits = j.value("limits", json::object());
  for (const auto& m : member(j, "modules", origin)) {
    ModuleInfo mi;
    mi.path = field<std::string>(m, "path", origin + " modules");
    mi.cls = field<std::string>(m, "class", origin + " modules");
    mi.attrs = m.value("attrs", json::object());
    t.modules[mi.path] = std::move(mi);
  }
  for (const auto& s : member(j, "steps", origin)) {
    Step st;
    const std::string where = origin + " step";
    st.step = field<int64_t>(s, "step", where);
    st.kind = field<std::string>(s, "kind", where);
    st.num_tokens = optional_integer(s, "num_tokens", 0, where);
    st.num_requests = optional_integer(s, "num_requests", 0, where);
    st.num_prefill_tokens = optional_integer(s, "num_prefill_tokens", 0, where);
    st.num_decode_requests = optional_integer(s, "num_decode_requests", 0, where);
    for (const auto& c : optional_member(s, "calls", where))
      st.calls.push_back({field<int64_t>(c, "id", where), optional_integer(c, "parent", -1, where),
                          field<int64_t>(c, "seq", where), field<std::string>(c, "module", where)});
    const std::string op_where = where + " op";
    for (const auto& o : member(s, "ops", where)) st.ops.push_back(parse_op(o, op_where));
    t.steps.push_back(std::move(st));
  }
  t.summary = j.value("summary", json::object());
  t.verification = j.value("verification", json::object());
  return t;
}
}  // namespace

Trace read_trace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) DOOLY_THROW(InputError, "check the path", "cannot open trace '{}'", path);
  // Read whole, then parsed from memory: nlohmann's stream adapter reads a character at a time through the
  // stream buffer, most of the parse's time on a corpus of traces.
  std::ostringstream text;
  text << in.rdbuf();
  json j;
  try {
    j = json::parse(text.view());
  } catch (const json::exception& e) {
    DOOLY_THROW(InputError, "re-create the trace with `dooly trace`", "'{}' is not valid JSON ({})", path, e.what());
  }
  return parse_trace(j, path);
}

}  // namespace dooly::trace
