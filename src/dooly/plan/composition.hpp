#pragma once
// What one engine step carries: its requests, each with the tokens it brings this step and the tokens already in
// its KV cache. Every request-side quantity a trace labels is a function of it (docs/dooly-tracing.md, taint
// sources), which is how a sweep point becomes the values of a unit's dimensions:
//   NUM_TOKS = sum new, NUM_REQS = n, KV_TOKS = sum (context + new), MAX_SEQLEN_Q = max new,
//   MAX_SEQLEN_K = max (context + new), and for sliding-window layers of window w (HF's paged cache keeps at most
//   w - 1 earlier tokens per request) KV_TOKS_SLIDING(w) = sum (min(context, w - 1) + new),
//   MAX_SEQLEN_K_SLIDING(w) = max (min(context, w - 1) + new).
// Engine limits (MAX_NUM_TOKS, MAX_NUM_REQS, CACHE_SLOTS) are the engine's configuration, not the step's: they
// are fixed at the values the trace ran with.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dooly::plan {

struct RequestSlice {
  int64_t new_tokens = 1;  // tokens this step computes for the request (1 for a decode)
  int64_t context = 0;     // tokens of the request already in the KV cache
};

struct Composition {
  std::vector<RequestSlice> requests;

  int64_t num_tokens() const noexcept;
  int64_t num_requests() const noexcept { return static_cast<int64_t>(requests.size()); }
  // Requests with more than one new token, or with none cached yet, count as prefill (a chunk).
  int64_t prefill_tokens() const noexcept;
  int64_t decode_requests() const noexcept;

  // The composition's value of a step quantity (the list above), or nullopt for a name it does not define.
  std::optional<int64_t> value_of(const std::string& name) const;
};

// The engine limits of a trace, by symbol: MAX_NUM_TOKS, MAX_NUM_REQS, CACHE_SLOTS.
using Limits = std::map<std::string, int64_t>;

// Is `name` a quantity of the step (bound by a composition) or an engine limit (fixed)?
bool is_step_quantity(const std::string& name);
bool is_limit(const std::string& name);

}  // namespace dooly::plan
