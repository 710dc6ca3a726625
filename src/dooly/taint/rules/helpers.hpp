#pragma once
// Small shared pieces of the rule classes (not a public header of the library).
#include <string>
#include <vector>

#include "dooly/taint/rules.hpp"

namespace dooly::taint::rules {

[[noreturn]] void mismatch(const std::string& why);

// The tensor at pos/name, or RuleMismatch.
const Value& tensor_at(const RuleContext& c, size_t pos, std::string_view name);
// An integer argument's label; a missing/None argument gives def (nullptr def -> RuleMismatch).
ExprPtr int_at(const RuleContext& c, size_t pos, std::string_view name, ExprPtr def = nullptr);
bool has(const RuleContext& c, size_t pos, std::string_view name);
bool bool_at(const RuleContext& c, size_t pos, std::string_view name, bool def);
// Sizes given either as varargs ints from position `from` (view(a, b, c)) or as one list (view([a, b])).
std::vector<ExprPtr> sizes_from(const RuleContext& c, size_t from, std::string_view name);
// Labels of a list-of-ints value (or a single int).
std::vector<ExprPtr> int_list(const Value& v);
// Normalises a possibly negative dimension index; RuleMismatch when out of range.
size_t norm_dim(int64_t d, size_t rank);
// Dims as given by an int or a list of ints (for reductions); empty when absent.
std::vector<size_t> dims_at(const RuleContext& c, size_t pos, std::string_view name, size_t rank, bool* given);
// Right-aligned broadcast of several shapes; a position whose partners disagree in kind is noted.
std::vector<ExprPtr> broadcast(RuleContext& c, const std::vector<const Value*>& tensors);
Value tensor(std::vector<ExprPtr> dims);
Value integer(ExprPtr l);
// The call's recorded outputs with every dimension and integer marked UNKNOWN ("DATA"): what an op whose
// result depends on tensor contents (nonzero, item, ...) gives; `why` goes into the notes.
std::vector<Value> from_tensor_data(RuleContext& c, std::string_view why);

using Registrar = void (*)(RuleRegistry&);
void register_factory(RuleRegistry&);
void register_view(RuleRegistry&);
void register_matmul(RuleRegistry&);
void register_concat(RuleRegistry&);
void register_index(RuleRegistry&);
void register_elementwise(RuleRegistry&);
void register_reduce(RuleRegistry&);
void register_permute(RuleRegistry&);
void register_embedding(RuleRegistry&);
void register_attention(RuleRegistry&);
void register_query(RuleRegistry&);

}  // namespace dooly::taint::rules
