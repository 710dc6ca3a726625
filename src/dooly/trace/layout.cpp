#include "dooly/trace/layout.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "dooly/common/error.hpp"

namespace dooly::trace {
namespace {

constexpr const char* kFix = "re-create the trace with `dooly trace`";

// Products of a stride and a size can pass int64 before a result is checked; GCC's and Clang's 128-bit integer
// holds them (__extension__: not ISO C++, so -Wpedantic would refuse the plain name).
__extension__ using Wide = __int128;

void check(const std::vector<int64_t>& sizes, const Layout& l) {
  if (sizes.size() != l.strides.size())
    DOOLY_THROW(InputError, kFix, "a tensor of rank {} records {} strides", sizes.size(), l.strides.size());
  if (l.offset < 0) DOOLY_THROW(InputError, kFix, "a tensor records a negative storage offset ({})", l.offset);
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] < 0 || l.strides[d] < 0)
      DOOLY_THROW(InputError, kFix, "dimension {} records size {} and stride {}: neither may be negative", d, sizes[d],
                  l.strides[d]);
}

// The dims that carry the layout (size > 1, stride > 0), outermost first; ties (only possible for overlapping
// views) by index, so the order is deterministic.
std::vector<size_t> ordered_dims(const std::vector<int64_t>& sizes, const Layout& l) {
  std::vector<size_t> dims;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] > 1 && l.strides[d] > 0) dims.push_back(d);
  std::stable_sort(dims.begin(), dims.end(), [&](size_t a, size_t b) { return l.strides[a] > l.strides[b]; });
  return dims;
}

int64_t checked(Wide v, const char* what) {
  if (v > INT64_MAX) DOOLY_THROW(InputError, kFix, "a strided input's {} at this point exceeds int64", what);
  return static_cast<int64_t>(v);
}

// Per dim, whether it is a static buffer's row: a gap (its stride past the extent of the dim inside it) with a
// swept dim (`swept(d)`) somewhere inside it. `dims` as ordered_dims gives them for `sizes`.
template <class Swept>
std::vector<bool> buffer_rows(const std::vector<size_t>& dims, const std::vector<int64_t>& sizes, const Layout& l,
                              Swept swept) {
  std::vector<bool> rows(sizes.size(), false);
  bool swept_inside = !dims.empty() && swept(dims.back());
  for (size_t k = dims.size(); k-- > 1;) {  // dims[k - 1] around dims[k]
    const size_t d = dims[k - 1], in = dims[k];
    rows[d] = swept_inside && l.strides[d] > static_cast<Wide>(l.strides[in]) * sizes[in];
    swept_inside = swept_inside || swept(d);
  }
  return rows;
}

}  // namespace

int64_t dtype_bytes(const std::string& dtype) {
  if (dtype == "complex128") return 16;
  if (dtype == "float64" || dtype == "int64" || dtype == "uint64" || dtype == "complex64") return 8;
  if (dtype == "float32" || dtype == "int32" || dtype == "uint32" || dtype == "complex32") return 4;
  if (dtype == "bfloat16" || dtype == "float16" || dtype == "int16" || dtype == "uint16") return 2;
  return 1;
}

std::string layout_token(const std::vector<int64_t>& sizes, const Layout& l, int64_t element_bytes) {
  check(sizes, l);
  const std::vector<size_t> dims = ordered_dims(sizes, l);
  std::string token;
  for (size_t k = 0; k < dims.size(); ++k) {
    token += fmt::format("{}", dims[k]);
    if (k + 1 == dims.size()) break;
    const Wide inner_extent = static_cast<Wide>(l.strides[dims[k + 1]]) * sizes[dims[k + 1]];
    const Wide s = l.strides[dims[k]];
    token += s == inner_extent ? 'p' : (s > inner_extent ? 'g' : 'o');
  }
  std::string broadcast;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] > 1 && l.strides[d] == 0) broadcast += fmt::format("{}{}", broadcast.empty() ? "" : ",", d);
  if (!broadcast.empty()) token += ";b" + broadcast;
  if (!dims.empty() && l.strides[dims.back()] != 1) token += fmt::format(";i{}", l.strides[dims.back()]);
  const Wide offset_bytes = static_cast<Wide>(l.offset) * std::max<int64_t>(element_bytes, 1);  // no int64 overflow
  int64_t align = 16;
  while (align > 1 && offset_bytes % align != 0) align /= 2;
  token += fmt::format(";a{}", align);
  return token;
}

StridesAt strides_at(const std::vector<int64_t>& traced_sizes, const Layout& l, const std::vector<int64_t>& sizes,
                     const std::vector<bool>& swept) {
  check(traced_sizes, l);
  if (sizes.size() != traced_sizes.size())
    DOOLY_THROW(InputError, kFix, "a tensor of rank {} was asked for at rank {}", traced_sizes.size(), sizes.size());
  if (!swept.empty() && swept.size() != sizes.size())
    DOOLY_THROW(InputError, kFix, "a tensor of rank {} has {} swept flags", sizes.size(), swept.size());
  const auto is_swept = [&](size_t d) { return swept.empty() ? sizes[d] != traced_sizes[d] : bool(swept[d]); };
  StridesAt out;
  out.strides.assign(sizes.size(), 0);
  out.offset = l.offset;
  const std::vector<size_t> dims = ordered_dims(traced_sizes, l);
  const std::vector<bool> rows = buffer_rows(dims, traced_sizes, l, is_swept);
  for (size_t k = dims.size(); k-- > 0;) {
    const size_t d = dims[k];
    if (k + 1 == dims.size()) {
      out.strides[d] = l.strides[d];
      continue;
    }
    const size_t in = dims[k + 1];
    const Wide old_extent = static_cast<Wide>(l.strides[in]) * traced_sizes[in];
    const Wide new_extent = static_cast<Wide>(out.strides[in]) * std::max<int64_t>(sizes[in], 1);
    Wide stride = (static_cast<Wide>(l.strides[d]) * new_extent + old_extent - 1) / old_extent;
    if (rows[d]) {  // a static buffer's rows: the traced room beyond what is read, rounded up
      stride = new_extent + (l.strides[d] - old_extent);
      stride = (stride + kBufferRowAlign - 1) / kBufferRowAlign * kBufferRowAlign;
    }
    out.strides[d] = checked(std::max<Wide>(stride, 1), "stride");
  }
  // Dims of size 1 in the trace: outermost, innermost of them first, each packed outside what is inside it.
  int64_t span = 1;
  for (size_t d : dims)
    span = std::max(span, checked(static_cast<Wide>(out.strides[d]) * std::max<int64_t>(sizes[d], 1), "extent"));
  for (size_t d = sizes.size(); d-- > 0;) {
    if (traced_sizes[d] > 1) continue;  // a layout dim, or a broadcast one (stride 0, kept)
    out.strides[d] = span;
    span = checked(static_cast<Wide>(span) * std::max<int64_t>(sizes[d], 1), "extent");
  }
  Wide last = l.offset;
  bool empty = false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) empty = true;
    if (sizes[d] > 0) last += static_cast<Wide>(sizes[d] - 1) * out.strides[d];
  }
  out.storage_elements = checked(empty ? l.offset : last + 1, "storage");
  return out;
}

bool has_buffer_rows(const std::vector<int64_t>& sizes, const Layout& l, const std::vector<bool>& swept) {
  check(sizes, l);
  if (swept.size() != sizes.size())
    DOOLY_THROW(InputError, kFix, "a tensor of rank {} has {} swept flags", sizes.size(), swept.size());
  const std::vector<bool> rows = buffer_rows(ordered_dims(sizes, l), sizes, l, [&](size_t d) { return swept[d]; });
  return std::find(rows.begin(), rows.end(), true) != rows.end();
}

}  // namespace dooly::trace
