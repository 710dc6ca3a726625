#pragma once
// The memory layout of a traced tensor that is not plainly contiguous (a transposed view, one third of a fused QKV
// projection, an expanded KV head, the last token of a sequence): its strides and storage offset as traced, the
// token its signature hashes, and its strides at another sweep point so the profiler rebuilds the same layout
// (docs/dooly-tracing.md, "Layouts"). A contiguous tensor at an aligned offset records none: its signature is the
// one it had before layouts were recorded.
#include <cstdint>
#include <string>
#include <vector>

namespace dooly::trace {

// Bytes per element of a traced dtype name ("bfloat16", "int64", ...); 1 for names it does not know (bool, uint8,
// the float8 kinds).
int64_t dtype_bytes(const std::string& dtype);

struct Layout {
  std::vector<int64_t> strides;  // in elements, one per dimension
  int64_t offset = 0;            // storage offset, in elements
};

// What of a layout does not change along a sweep, as one token: the dims of size > 1 ordered by stride (outermost
// first), each outer one packed against the next inner one ('p'), leaving a gap ('g') or overlapping it ('o'); the
// broadcast dims (stride 0); the innermost stride when it is not 1; the offset's alignment in bytes (capped at 16).
// Throws InputError for strides and sizes of different ranks or a negative stride, offset or size.
std::string layout_token(const std::vector<int64_t>& sizes, const Layout& layout, int64_t element_bytes);

struct StridesAt {
  std::vector<int64_t> strides;
  int64_t offset = 0;
  int64_t storage_elements = 0;  // the storage the view needs: offset + the furthest element + 1
};

// Rows of a static buffer the engine sized are rebuilt a multiple of this many elements apart (see strides_at).
inline constexpr int64_t kBufferRowAlign = 64;

// Bumped when strides_at rebuilds a layout differently: a unit with such a layout has the points measured under an
// older rule measured again (dooly::plan, a row's extra_json "layout_rule", 1 when absent). 1: every gap grew in
// proportion to the dims inside it. 2: a gap around a swept dim is a static buffer's row (strides_at).
inline constexpr int kLayoutRule = 2;

// The traced layout carried to new sizes of the same rank: stride-0 dims stay broadcast; the innermost stride is
// kept; each outer stride scales with the extent of the dims inside it (packed stays packed); dims of size 1 in the
// trace (whose stride means nothing) go outermost; the offset is kept (and with it the alignment).
// A gap with a swept dim inside it (`swept[d]`: dim d's size follows the sweep point, NUM_TOKS / NUM_REQS / MIX; when
// `swept` is empty, the dims whose size differs from the trace's) is the rest of a static buffer the engine sized,
// like HF's attention-mask rows, num_pages + max_batch_tokens wide: it keeps the traced room beyond what is read,
// and its stride is rounded up to a multiple of kBufferRowAlign elements, as engines size such buffers in round
// numbers where a trace's sizes are odd on purpose (docs/dooly-tracing.md, "Layouts": cuDNN's SDPA runs 1.7x slower
// on mask rows not 16-byte aligned). A gap with nothing swept inside (a slice of a fused projection) keeps its
// traced stride. Throws InputError on a rank mismatch or a result beyond int64.
StridesAt strides_at(const std::vector<int64_t>& traced_sizes, const Layout& layout, const std::vector<int64_t>& sizes,
                     const std::vector<bool>& swept = {});

// Whether a traced layout has a gap that strides_at rebuilds as a static buffer's row (a swept dim inside it): the
// layouts kLayoutRule 2 changed. Throws InputError as strides_at does.
bool has_buffer_rows(const std::vector<int64_t>& sizes, const Layout& layout, const std::vector<bool>& swept);

}  // namespace dooly::trace
