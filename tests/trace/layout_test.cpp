// Layouts of non-contiguous inputs: the token signatures hash, and the strides the profiler rebuilds at another
// sweep point. The cases are the views real models hand to ops (read from traces of the corpus).
#include <gtest/gtest.h>

#include "dooly/common/error.hpp"
#include "dooly/trace/layout.hpp"

namespace dooly::trace {
namespace {

using V = std::vector<int64_t>;

TEST(Layout, TransposedHeadsArePackedAndScaleWithTheTokens) {
  // q.view(1, T, H, D).transpose(1, 2): sizes [1, H, T, D] over a [1, T, H, D] tensor.
  const int64_t T = 7, H = 4, D = 64;
  const Layout l{{T * H * D, D, H * D, 1}, 0};
  EXPECT_EQ(layout_token({1, H, T, D}, l, 2), "2p1p3;a16");  // the size-1 batch dim carries no layout
  const StridesAt at = strides_at({1, H, T, D}, l, {1, H, 19, D});
  EXPECT_EQ(at.strides, (V{19 * H * D, D, H * D, 1}));
  EXPECT_EQ(at.offset, 0);
  EXPECT_EQ(at.storage_elements, 19 * H * D);
  // Two batches: the dim of size 1 in the trace goes outermost, packed.
  EXPECT_EQ(strides_at({1, H, T, D}, l, {2, H, 19, D}).strides, (V{19 * H * D, D, H * D, 1}));
  EXPECT_EQ(strides_at({1, H, T, D}, l, {2, H, 19, D}).storage_elements, 2 * 19 * H * D);
}

TEST(Layout, ASliceOfAFusedProjectionKeepsItsRowPitchAndOffset) {
  // k = qkv[:, HD:2HD] of qkv [T, 3HD]: rows 3HD apart, starting HD in.
  const int64_t T = 5, HD = 256;
  const Layout l{{3 * HD, 1}, HD};
  EXPECT_EQ(layout_token({T, HD}, l, 2), "0g1;a16");
  const StridesAt at = strides_at({T, HD}, l, {300, HD});
  EXPECT_EQ(at.strides, (V{3 * HD, 1}));
  EXPECT_EQ(at.offset, HD);
  EXPECT_EQ(at.storage_elements, HD + 299 * 3 * HD + HD);
  // The gap is not the packed layout: the tokens differ, so the two never share a signature.
  EXPECT_NE(layout_token({T, HD}, l, 2), layout_token({T, HD}, Layout{{HD, 1}, 0}, 2));
}

TEST(Layout, BroadcastHeadsStayBroadcast) {
  // repeat_kv: k[:, :, None].expand(1, KV, rep, T, D).
  const int64_t KV = 2, rep = 4, T = 9, D = 32;
  const Layout l{{KV * T * D, T * D, 0, D, 1}, 0};
  EXPECT_EQ(layout_token({1, KV, rep, T, D}, l, 2), "1p3p4;b2;a16");
  const StridesAt at = strides_at({1, KV, rep, T, D}, l, {1, KV, rep, 33, D});
  EXPECT_EQ(at.strides, (V{KV * 33 * D, 33 * D, 0, D, 1}));
  EXPECT_EQ(at.storage_elements, KV * 33 * D);
}

TEST(Layout, InnerStrideAndOffsetAlignmentAreHashed) {
  // x[..., ::2] and a view starting 3 bf16 elements in (6 bytes: 2-byte aligned).
  EXPECT_EQ(layout_token({4, 8}, Layout{{16, 2}, 0}, 2), "0p1;i2;a16");
  EXPECT_EQ(layout_token({4, 8}, Layout{{8, 1}, 3}, 2), "0p1;a2");
  EXPECT_EQ(layout_token({4, 8}, Layout{{8, 1}, 8}, 2), "0p1;a16");
  // An offset whose bytes pass int64 (a fuzzed trace) is still read without overflow.
  EXPECT_EQ(layout_token({4, 8}, Layout{{8, 1}, INT64_MAX}, 8), "0p1;a8");
  // Overlapping windows (unfold): the outer stride is inside the inner extent.
  EXPECT_EQ(layout_token({3, 8}, Layout{{2, 1}, 0}, 4), "0o1;a16");
}

TEST(Layout, AGapAroundASweptDimIsAStaticBufferRowRebuiltAligned) {
  // A slice of the first T of L rows of a cache [H, L, D] -> [H, T, D]: the head pitch keeps the traced room beyond
  // the T rows read, (L - T) * D, rounded up to kBufferRowAlign elements.
  const Layout l{{100 * 8, 8, 1}, 0};
  const StridesAt at = strides_at({2, 10, 8}, l, {2, 20, 8});
  EXPECT_EQ(at.strides, (V{896, 8, 1}));  // 20 * 8 + 720 = 880, up to 896
  const StridesAt down = strides_at({2, 10, 8}, l, {2, 1, 8});
  EXPECT_EQ(down.strides, (V{768, 8, 1}));                              // 8 + 720 = 728, up to 768
  EXPECT_EQ(strides_at({2, 10, 8}, l, {2, 0, 8}).storage_elements, 0);  // an empty view needs no storage
}

TEST(Layout, TheEngineMaskKeepsItsPagesOfRoomOnAlignedRows) {
  // HF continuous batching's mask: a [1, 1, T, KV] view of a [1, 1, max_batch_tokens, num_pages + max_batch_tokens]
  // buffer, traced with 331 blocks of 256 and max_batch_tokens 521 (rows 85,257 apart: odd, not 16-byte aligned).
  const Layout l{{44418897, 44418897, 85257, 1}, 0};
  const std::vector<bool> swept{false, false, true, true};  // NUM_TOKS, KV_TOKS
  // A decode replay's padded shape: 64 queries over 16,448 keys, rows 16,448 + 84,736 pages apart.
  const StridesAt at = strides_at({1, 1, 521, 521}, l, {1, 1, 64, 16448}, swept);
  EXPECT_EQ(at.strides[2], 16448 + 84736);
  EXPECT_EQ(at.strides[2] % kBufferRowAlign, 0);
  EXPECT_EQ(at.storage_elements, 63 * (16448 + 84736) + 16448);
  // At the traced sizes themselves the labels say the rows are a buffer's: aligned too.
  EXPECT_EQ(strides_at({1, 1, 521, 521}, l, {1, 1, 521, 521}, swept).strides[2], 85312);
  // Without labels only a changed size counts as swept: the traced point keeps the traced stride.
  EXPECT_EQ(strides_at({1, 1, 521, 521}, l, {1, 1, 521, 521}).strides[2], 85257);
}

TEST(Layout, BufferRowsAreGapsAroundASweptDim) {
  const Layout mask{{44418897, 44418897, 85257, 1}, 0};
  EXPECT_TRUE(has_buffer_rows({1, 1, 521, 521}, mask, {false, false, true, true}));
  EXPECT_FALSE(has_buffer_rows({1, 1, 521, 521}, mask, {false, false, true, false}));  // KV fixed: a fused slice
  // Transposed heads are packed, whatever is swept; a fused projection's slice has nothing swept inside its gap.
  EXPECT_FALSE(has_buffer_rows({1, 4, 7, 64}, Layout{{7 * 4 * 64, 64, 4 * 64, 1}, 0}, {false, false, true, false}));
  EXPECT_FALSE(has_buffer_rows({5, 256}, Layout{{768, 1}, 256}, {true, false}));
  EXPECT_THROW(has_buffer_rows({5, 256}, Layout{{768, 1}, 256}, {true}), InputError);
}

TEST(Layout, AGapWithNothingSweptInsideKeepsItsTracedStride) {
  // k = qkv[:, HD:2HD] with T swept and HD fixed: the fused row pitch is the model's, not a buffer's.
  const int64_t HD = 200;
  const Layout l{{3 * HD + 4, 1}, HD};
  EXPECT_EQ(strides_at({5, HD}, l, {300, HD}, {true, false}).strides, (V{3 * HD + 4, 1}));
  EXPECT_THROW(strides_at({5, HD}, l, {300, HD}, {true}), InputError);  // one flag a dim
}

TEST(Layout, BadRecordsAreInputErrors) {
  EXPECT_THROW(layout_token({2, 3}, Layout{{3}, 0}, 2), InputError);
  EXPECT_THROW(layout_token({2, 3}, Layout{{3, -1}, 0}, 2), InputError);
  EXPECT_THROW(layout_token({2, 3}, Layout{{3, 1}, -4}, 2), InputError);
  EXPECT_THROW(strides_at({2, 3}, Layout{{3, 1}, 0}, {2}), InputError);
  EXPECT_THROW(strides_at({2, 3}, Layout{{int64_t{1} << 62, 1}, 0}, {2, int64_t{1} << 40}), InputError);
}

TEST(Layout, DtypeBytes) {
  EXPECT_EQ(dtype_bytes("bfloat16"), 2);
  EXPECT_EQ(dtype_bytes("float32"), 4);
  EXPECT_EQ(dtype_bytes("int64"), 8);
  EXPECT_EQ(dtype_bytes("bool"), 1);
}

}  // namespace
}  // namespace dooly::trace
