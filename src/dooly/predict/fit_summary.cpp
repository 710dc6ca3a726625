#include "dooly/predict/fit_summary.hpp"

#include <set>

#include <nlohmann/json.hpp>

#include "dooly/store/store.hpp"

namespace dooly::predict {
namespace {

struct SignatureInfo {
  store::SignatureKind kind = store::SignatureKind::op;
  std::string name, metadata;
};

std::map<int64_t, SignatureInfo> signature_infos(store::Store& store, int64_t provenance_id) {
  store::Statement s = store.database().prepare(
      "SELECT id, name, kind, metadata_json FROM signatures WHERE id IN "
      "(SELECT signature_id FROM predictors WHERE provenance_id = ?)");
  s.bind(1, provenance_id);
  std::map<int64_t, SignatureInfo> out;
  while (s.step())
    out[s.column_int64(0)] = {store::parse_signature_kind(s.column_text(2)).value_or(store::SignatureKind::op),
                              s.column_text(1), s.column_text(3)};
  return out;
}

ErrorTally tally_of(const nlohmann::json& pair) {
  ErrorTally t;
  if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number() || !pair[1].is_number()) return t;
  t.n = pair[1].get<size_t>();
  t.sum = pair[0].get<double>() * static_cast<double>(t.n);
  return t;
}

// The class of a predictor's signature, from its name, metadata and the quantities in its parameters.
OpClass class_of(const store::PredictorRecord& r, const SignatureInfo& info) {
  const nlohmann::json params = nlohmann::json::parse(r.params_json, nullptr, false);
  std::vector<std::string> quantities;
  if (params.is_object() && params.contains("domain") && params["domain"].is_object())
    for (const auto& q : params["domain"].value("q", nlohmann::json::array()))
      if (q.is_string()) quantities.push_back(q.get<std::string>());
  return classify(info.kind, info.name, info.metadata, quantities);
}

// A member object of the evaluation JSON, or an empty object.
nlohmann::json member(const nlohmann::json& eval, const char* key) {
  return eval.is_object() && eval.contains(key) && eval[key].is_object() ? eval[key] : nlohmann::json::object();
}

// Adds one predictor's held-out errors, points and chosen model, by the kind of each point (attention: to the class
// of that kind).
void add_predictor(const store::PredictorRecord& r, OpClass base, FitSummary& out,
                   std::array<std::set<int64_t>, op_class_count>& members) {
  const nlohmann::json eval = nlohmann::json::parse(r.evaluation_json, nullptr, false);
  const nlohmann::json by_kind = member(eval, "by_kind"), points = member(eval, "points_by_kind");
  const bool latency = r.target == store::PredictorTarget::latency_s;
  std::set<size_t> classes{static_cast<size_t>(base)};  // where the chosen model is counted
  if (is_attention(base)) classes.clear();
  for (size_t k = 0; k < point_kind_count; ++k) {
    const auto kind = static_cast<PointKind>(k);
    const std::string key(to_string(kind));
    const auto c = static_cast<size_t>(is_attention(base) ? attention_class(kind) : base);
    ClassSummary& row = out.by_class[c];
    if (by_kind.contains(key)) {
      const ErrorTally t = tally_of(by_kind[key]);
      (latency ? row.latency : row.energy).add(t);
      (latency ? out.latency : out.energy).add(t);
    }
    if (points.contains(key) && points[key].is_number()) {
      classes.insert(c);
      if (latency) row.points += points[key].get<size_t>();
      if (latency) members[c].insert(r.signature_id);
    }
  }
  for (size_t c : classes) ++out.by_class[c].models[r.model];
}

}  // namespace

FitSummary summarize_predictors(store::Store& store, int64_t provenance_id) {
  FitSummary out;
  const auto infos = signature_infos(store, provenance_id);
  std::array<std::set<int64_t>, op_class_count> members;
  for (const store::PredictorRecord& r : store.predictors(provenance_id)) {
    const auto info = infos.find(r.signature_id);
    if (info == infos.end()) continue;
    const OpClass base = class_of(r, info->second);
    ++out.predictors;
    add_predictor(r, base, out, members);
  }
  for (size_t c = 0; c < op_class_count; ++c) out.by_class[c].signatures = members[c].size();
  return out;
}

}  // namespace dooly::predict
