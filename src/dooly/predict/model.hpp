#pragma once
// A candidate model of one target (seconds or joules per call) over a signature's free quantities, and the registry
// of candidates the selection tries. A candidate fits samples (or declines: too few points, a zero where it takes a
// logarithm, more quantities than it handles), evaluates without allocating, and round-trips its parameters
// through JSON. The registry rejects a second candidate under a name it holds.
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "dooly/predict/samples.hpp"

namespace dooly::predict {

class Model {
 public:
  virtual ~Model() = default;
  // The candidate's name (the registry key), e.g. "interp_loglog".
  virtual std::string_view name() const noexcept = 0;
  // x: the free coordinates (Domain::reduce), as many as the samples had. Outside the measured points the value is
  // the model's own extension (flagged by the caller through the domain, never silently trusted).
  virtual double evaluate(std::span<const double> x) const noexcept = 0;
  virtual nlohmann::json params() const = 0;
};

struct Candidate {
  std::string name;
  // nullptr: the candidate does not apply to these samples.
  std::function<std::unique_ptr<Model>(const Samples&)> fit;
  // Throws InputError when the parameters are not this candidate's.
  std::function<std::unique_ptr<Model>(const nlohmann::json&)> load;
};

class CandidateRegistry {
 public:
  // Throws DuplicateError when the name is taken, InputError when a field is empty.
  void add(Candidate candidate);
  const Candidate* find(std::string_view name) const noexcept;
  // In registration order: the order ties in held-out error are broken in (simplest first).
  const std::vector<Candidate>& all() const noexcept { return candidates_; }

 private:
  std::vector<Candidate> candidates_;
};

// constant, ls_linear, ls_product, interp_linear, interp_loglog, gbt (in that order).
const CandidateRegistry& default_candidates();

// Rebuilds a stored model; throws InputError for an unknown candidate or malformed parameters.
std::unique_ptr<Model> load_model(const CandidateRegistry& registry, std::string_view name,
                                  const nlohmann::json& params);

}  // namespace dooly::predict
