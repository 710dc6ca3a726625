// dooly predict fit --db DB [--provenance ID] [--force]
// dooly predict step --db DB --model NAME --attention BACKEND --composition TEXT [--provenance ID] [--graphs on|off]
//                   [--moe-routing auto|uniform|random|experts:K|skew:S] [--padding N] [--terms]
// fit: fits the predictors whose points changed (dooly::predict::fit_store) and prints the held-out error by op class
// with the share of step time each class holds for a reference step. step: one step's predicted device time and
// energy, by op class (dooly::predict::StepModel). docs/predict.md.
#include <array>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "dooly/cli/command_registry.hpp"
#include "dooly/common/error.hpp"
#include "dooly/predict/composition_text.hpp"
#include "dooly/predict/fit_summary.hpp"
#include "dooly/predict/fitter.hpp"
#include "dooly/predict/step_model.hpp"
#include "dooly/store/store.hpp"

namespace {

using namespace dooly;

void print(const std::string& text) { std::fputs(text.c_str(), stdout); }

std::string percent(const predict::ErrorTally& t) {
  const auto m = t.mape();
  return m ? fmt::format("{:.1f} %", *m * 100) : std::string("-");
}

using predict::OpClass;

struct FitArgs {
  std::string db;
  int64_t provenance = 0;
  bool force = false;
  std::string reference_model = "llama-3.1-8b";
  std::string reference_attention = "paged|sdpa";
  std::string reference_composition = "256,8x1@1024";
};

struct StepArgs {
  std::string db;
  std::string model;
  std::string attention;
  std::string composition;
  int64_t provenance = 0;
  std::string graphs = "on";
  std::string moe_routing = "auto";
  int64_t padding = 0;
  bool terms = false;
};

// The share of the step's time (device + host) each class holds, where the reference step took that class's cost
// from `provenance`.
struct Shares {
  std::array<std::optional<double>, predict::op_class_count> of_class{};
};

Shares shares_for(const predict::StepModel& m, const predict::StepBreakdown& b, int64_t provenance) {
  Shares out;
  const double step_s = b.total.device_s + b.total.host_s;
  if (step_s <= 0) return out;
  for (size_t c = 0; c < predict::op_class_count; ++c) {
    const bool engine = static_cast<OpClass>(c) == OpClass::engine;
    const int64_t from = engine ? m.host_provenance_id() : m.measurement_provenance_id();
    if (from == provenance && b.by_class[c].terms > 0) out.of_class[c] = b.by_class[c].device_s / step_s;
  }
  return out;
}

std::string share_text(const std::optional<double>& share) {
  return share ? fmt::format("{:.1f} %", *share * 100) : std::string("-");
}

void print_summary(store::Store& db, int64_t provenance, const Shares& shares) {
  const predict::FitSummary s = predict::summarize_predictors(db, provenance);
  print(fmt::format("provenance {}: {} predictors; held-out MAPE over interior held-out points, pooled\n", provenance,
                    s.predictors));
  print(fmt::format("{:<18} {:>10} {:>7} {:>13} {:>12} {:>11}  {}\n", "class", "signatures", "points", "latency MAPE",
                    "energy MAPE", "step share", "models chosen (latency and energy)"));
  for (size_t c = 0; c < predict::op_class_count; ++c) {
    const predict::ClassSummary& row = s.by_class[c];
    if (row.signatures == 0 && row.models.empty()) continue;
    std::string models;
    for (const auto& [name, n] : row.models) models += fmt::format("{}{} {}", models.empty() ? "" : ", ", name, n);
    print(fmt::format("{:<18} {:>10} {:>7} {:>13} {:>12} {:>11}  {}\n", predict::to_string(static_cast<OpClass>(c)),
                      row.signatures, row.points, percent(row.latency), percent(row.energy),
                      share_text(shares.of_class[c]), models));
  }
  print(fmt::format("{:<18} {:>10} {:>7} {:>13} {:>12}\n", "all", "", "", percent(s.latency), percent(s.energy)));
}

// The reference step whose time shares the fit table shows; nullopt (and one line why) when it cannot be built.
std::optional<std::pair<predict::StepModel, predict::StepBreakdown>> reference_step(store::Store& db,
                                                                                    const FitArgs& a) {
  try {
    predict::StepModelOptions o;
    o.model = a.reference_model;
    o.attention = a.reference_attention;
    predict::StepModel m = predict::StepModel::load(db, o);
    predict::StepBreakdown b = m.explain(predict::parse_composition(a.reference_composition));
    print(
        fmt::format("reference step: {} under {} (trace provenance {}), {} ({}): device {:.3f} ms, host {} -> "
                    "step shares below; {} of its signatures add nothing (not measured)\n",
                    m.model_name(), m.attention_backend(), m.trace_provenance_id(), a.reference_composition,
                    predict::to_string(b.total.kind), b.total.device_s * 1e3,
                    m.has_host_cost() ? fmt::format("{:.3f} ms", b.total.host_s * 1e3) : std::string("not measured"),
                    m.missing().size()));
    return std::make_pair(std::move(m), std::move(b));
  } catch (const Error& e) {
    print(fmt::format("reference step: none ({})\n", e.problem()));
    return std::nullopt;
  }
}

void run_fit(const FitArgs& a) {
  store::Store db = store::Store::open(a.db);
  predict::FitOptions options;
  if (a.provenance > 0) options.provenance_id = a.provenance;
  options.force = a.force;
  const auto start = std::chrono::steady_clock::now();
  const predict::FitReport r = predict::fit_store(db, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (r.provenances.empty())
    DOOLY_THROW(InputError, "measure it first (`dooly profile ... --db FILE`)",
                "store {} holds no measurements to fit predictors to", a.db);
  print(fmt::format("{}: {} signatures, {} predictors fitted, {} unchanged, {} removed in {:.1f} s\n", a.db,
                    r.signatures, r.fitted, r.unchanged, r.removed, seconds));
  const auto reference = reference_step(db, a);
  for (const int64_t p : r.provenances)
    print_summary(db, p, reference ? shares_for(reference->first, reference->second, p) : Shares{});
}

void print_missing(const predict::StepModel& m, predict::StepKind kind) {
  const predict::StepKind phase = m.phase_taken(kind);
  std::string list;
  size_t n = 0;
  for (const predict::MissingTerm& t : m.missing()) {
    if (t.phase != phase) continue;
    ++n;
    list += fmt::format("\n  {} (signature {}, x{}): {}", t.name, t.signature_id, t.count, t.reason);
  }
  if (n > 0) print(fmt::format("missing: {} signatures of this step add nothing:{}\n", n, list));
}

// --moe-routing, checked with --padding: only random routing (or auto) reads the padding tokens.
std::optional<predict::MoeRouting> routing_for_padding(const StepArgs& a, const plan::Composition& composition) {
  const std::optional<predict::MoeRouting> moe_routing = predict::parse_moe_routing(a.moe_routing);
  if (a.padding < 0 || a.padding >= composition.num_tokens())
    DOOLY_THROW(InputError, "give --padding below the composition's tokens (a replay pads its last request)",
                "--padding {} for a step of {} tokens", a.padding, composition.num_tokens());
  if (a.padding > 0 && (!moe_routing || moe_routing->mode != predict::MoeRouting::Mode::random))
    DOOLY_THROW(InputError, "give --moe-routing random or auto with it, or leave --padding out",
                "--padding {}: only random MoE routing reads the padding (it routes the padding tokens together); "
                "the routing is {}",
                a.padding, predict::format_moe_routing(moe_routing));
  return moe_routing;
}

void run_step(const StepArgs& a) {
  if (a.graphs != "on" && a.graphs != "off")
    DOOLY_THROW(InputError, "use --graphs on or --graphs off", "unknown --graphs '{}'", a.graphs);
  const plan::Composition composition = predict::parse_composition(a.composition);  // checked before the store
  const std::optional<predict::MoeRouting> moe_routing = routing_for_padding(a, composition);
  store::Store db = store::Store::open(a.db, store::Store::Mode::read_only);
  predict::StepModelOptions o;
  o.model = a.model;
  o.attention = a.attention;
  if (a.provenance > 0) o.measurement_provenance_id = a.provenance;
  o.cuda_graphs = a.graphs == "on";
  o.moe_routing = moe_routing;
  const predict::StepModel m = predict::StepModel::load(db, o);
  const predict::StepBreakdown b = m.explain(composition, a.padding);
  print(fmt::format(
      "{} under {} (trace provenance {}), measured under provenance {}; step {} ({}, {} request{}, {} "
      "token{})\n",
      m.model_name(), m.attention_backend(), m.trace_provenance_id(), m.measurement_provenance_id(),
      predict::format_composition(composition), predict::to_string(b.total.kind), composition.num_requests(),
      composition.num_requests() == 1 ? "" : "s", composition.num_tokens(), composition.num_tokens() == 1 ? "" : "s"));
  const std::string host =
      m.has_host_cost() ? fmt::format("host {:.3f} ms (engine, CUDA graphs {}, provenance {})", b.total.host_s * 1e3,
                                      m.host_cuda_graphs() ? "on" : "off", m.host_provenance_id())
                        : std::string("host not measured for this model");
  print(fmt::format("device {:.3f} ms, energy {:.4f} J, {}; {} of {} terms extrapolated\n", b.total.device_s * 1e3,
                    b.total.energy_j, host, b.total.extrapolated_terms, b.terms.size() + (m.has_host_cost() ? 1 : 0)));
  if (m.routes_moe())
    print(fmt::format("{}{}\n", m.routing_summary(),
                      a.padding > 0 ? fmt::format(", {} padding tokens routed together", a.padding) : ""));
  print(fmt::format("{:<18} {:>6} {:>11} {:>7} {:>10} {:>13}\n", "class", "terms", "time ms", "share", "energy J",
                    "extrapolated"));
  const double step_s = b.total.device_s + b.total.host_s;
  for (size_t c = 0; c < predict::op_class_count; ++c) {
    const predict::ClassCost& cc = b.by_class[c];
    if (cc.terms == 0) continue;
    print(fmt::format("{:<18} {:>6} {:>11.4f} {:>6.1f}% {:>10.5f} {:>13}\n",
                      predict::to_string(static_cast<OpClass>(c)), cc.terms, cc.device_s * 1e3,
                      step_s > 0 ? 100 * cc.device_s / step_s : 0.0, cc.energy_j, cc.extrapolated));
  }
  if (a.terms)
    for (const predict::TermCost& t : b.terms)
      print(fmt::format("  {:<30} x{:<4} {:>11.4f} ms {:>10.5f} J {:<14} {}{}\n", t.name, t.count, t.device_s * 1e3,
                        t.energy_j, predict::to_string(t.op_class), t.model, t.outside ? " (outside)" : ""));
  print_missing(m, b.total.kind);
}

void setup_predict(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("predict", "Fit per-signature predictors; predict a step's time and energy");
  cmd->require_subcommand(1);

  auto f = std::make_shared<FitArgs>();
  CLI::App* fit = cmd->add_subcommand("fit", "Fit the predictors whose points changed; print held-out errors by class");
  fit->add_option("--db", f->db, "the dooly store (migrated to the current schema if older)")
      ->required()
      ->check(CLI::ExistingFile);
  fit->add_option("--provenance", f->provenance, "only this measurement provenance (default: every measured one)");
  fit->add_flag("--force", f->force, "refit every predictor, changed or not");
  fit->add_option("--reference-model", f->reference_model, "the model of the reference step (its time shares)")
      ->capture_default_str();
  fit->add_option("--reference-attention", f->reference_attention, "its attention backend")->capture_default_str();
  fit->add_option("--reference-composition", f->reference_composition, "its composition, as --composition of step")
      ->capture_default_str();
  fit->callback([f] { run_fit(*f); });

  auto s = std::make_shared<StepArgs>();
  CLI::App* step = cmd->add_subcommand("step", "Predict one step's device time and energy, by op class");
  step->add_option("--db", s->db, "a dooly store at the current schema")->required()->check(CLI::ExistingFile);
  step->add_option("--model", s->model, "a model the store holds (e.g. llama-3.1-8b)")->required();
  step->add_option("--attention", s->attention, "the traced attention backend: exact, or its family (paged|sdpa)")
      ->required();
  step->add_option("--composition", s->composition,
                   "the step's requests: [COUNTx]NEW[@CONTEXT],... e.g. 256,8x1@1024 (a 256-token chunk and 8 "
                   "decodes at 1024 cached tokens)")
      ->required();
  step->add_option("--provenance", s->provenance, "the measurement provenance (default: the one covering most)");
  step->add_option("--graphs", s->graphs, "engine host cost with CUDA graphs on or off")->capture_default_str();
  step->add_option("--moe-routing", s->moe_routing,
                   "MoE models: the grouped GEMMs' routing, auto (random where the store has routing points, else "
                   "uniform), uniform, random, experts:K or skew:S (the store's routing points)")
      ->capture_default_str();
  step->add_option("--padding", s->padding,
                   "of the step's tokens, those a CUDA graph's replay padded it with (random MoE routing reads it)")
      ->capture_default_str();
  step->add_flag("--terms", s->terms, "list every term (signature x count) with its time, energy and model");
  step->callback([s] { run_step(*s); });
}

const bool registered = dooly::cli::add_command("predict", &setup_predict);

}  // namespace
