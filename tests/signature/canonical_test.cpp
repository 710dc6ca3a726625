// The canonical serialization and its hash: exact bytes, a hard-coded hash (cross-machine drift shows up
// here), what is and is not hashed.
#include <gtest/gtest.h>

#include "dooly/signature/canonical.hpp"
#include "dooly/signature/sha256.hpp"
#include "dooly/signature/sign.hpp"
#include "dooly/trace/call_tree.hpp"

namespace dooly::signature {
namespace {

using nlohmann::json;

trace::DimLabel dim(int64_t v, taint::Kind k, std::string e, std::string f) {
  return {v, k, std::move(e), std::move(f)};
}

trace::OpRecord linear_op(int64_t toks, int64_t hidden) {
  trace::OpRecord op;
  op.op = "linear";
  op.module = "model.layers.0.mlp.down_proj";
  op.inputs = {{{dim(1, taint::Kind::none, "1", "1"), dim(toks, taint::Kind::num_toks, "NUM_TOKS", "NUM_TOKS"),
                 dim(176, taint::Kind::model_config, "intermediate_size", "176")},
                "bfloat16",
                std::nullopt},
               {{dim(hidden, taint::Kind::model_config, "hidden_size", std::to_string(hidden)),
                 dim(176, taint::Kind::model_config, "intermediate_size", "176")},
                "bfloat16",
                std::nullopt}};
  op.outputs = {{{dim(1, taint::Kind::none, "1", "1"), dim(toks, taint::Kind::num_toks, "NUM_TOKS", "NUM_TOKS"),
                  dim(hidden, taint::Kind::model_config, "hidden_size", std::to_string(hidden))},
                 "bfloat16",
                 std::nullopt}};
  op.scalars = {{"2", "none", nullptr, std::nullopt}, {"alpha", "float", 1e-06, std::nullopt}};
  op.kernels = {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"};
  return op;
}

TEST(Sha256, KnownVector) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Canonical, ExactBytesAndHardCodedHash) {
  const std::string bytes = serialize(canonical_op(linear_op(521, 64), ""));
  EXPECT_EQ(bytes, R"({"attrs":"","inputs":[{"dtype":"bfloat16","shape":["1","NUM_TOKS:NUM_TOKS","176"]},)"
                   R"({"dtype":"bfloat16","shape":["64","176"]}],"kind":"op","name":"linear",)"
                   R"("outputs":[{"dtype":"bfloat16","shape":["1","NUM_TOKS:NUM_TOKS","64"]}],)"
                   R"("scalars":[["2","none",null],["alpha","float","1e-06"]],"v":1})");
  // Computed once from the bytes above (python3 -c "import hashlib;print(hashlib.sha256(b'...').hexdigest())");
  // a change here means every stored signature changes: bump kSignatureVersion and say so in the docs.
  EXPECT_EQ(sha256_hex(bytes), "9c49f2370929b6c95e6210e1fa547ce8955c5e0675b487e78aa2a37ed9dc766d");
}

TEST(Canonical, RequestDimsAreNotHashedByValueConfigDimsAre) {
  const std::string a = sha256_hex(serialize(canonical_op(linear_op(521, 64), "")));
  EXPECT_EQ(a, sha256_hex(serialize(canonical_op(linear_op(131, 64), "")))) << "NUM_TOKS value must not matter";
  EXPECT_NE(a, sha256_hex(serialize(canonical_op(linear_op(521, 128), "")))) << "a config dim must";
  trace::OpRecord k = linear_op(521, 64);
  k.kernels = {"other_kernel"};
  EXPECT_EQ(a, sha256_hex(serialize(canonical_op(k, "")))) << "kernel symbols are metadata";
  trace::OpRecord bf = linear_op(521, 64);
  bf.inputs[0].dtype = "float16";
  EXPECT_NE(a, sha256_hex(serialize(canonical_op(bf, "")))) << "dtype is hashed";
}

// A strided input (trace format 3) hashes its layout token; a contiguous one hashes exactly as before (the bytes
// above), so a store's signatures of contiguous work stay valid across the format change.
TEST(Canonical, AStridedInputIsOtherWorkThanAContiguousOne) {
  const std::string plain = serialize(canonical_op(linear_op(521, 64), ""));
  trace::OpRecord t = linear_op(521, 64);
  t.inputs[1].layout = trace::Layout{{1, 64}, 0};  // the weight transposed: [64, 176] with strides (1, 64)
  const std::string strided = serialize(canonical_op(t, ""));
  EXPECT_NE(strided.find(R"("layout":"1p0;a16")"), std::string::npos) << strided;
  EXPECT_NE(sha256_hex(plain), sha256_hex(strided));
  trace::OpRecord other_toks = linear_op(131, 64);
  other_toks.inputs[1].layout = t.inputs[1].layout;
  EXPECT_EQ(sha256_hex(strided), sha256_hex(serialize(canonical_op(other_toks, ""))))
      << "the token is sweep-invariant: NUM_TOKS must still not matter";
}

TEST(Canonical, AttributeDigestSkipsTrainingIndicesAndStrings) {
  const json a = {{"sliding_window", 4096}, {"scaling", 0.0625}, {"is_causal", true}};
  json b = a;
  b["training"] = true;
  b["layer_idx"] = 7;
  b["layer_type"] = "sliding_attention";
  EXPECT_EQ(attrs_digest(a), attrs_digest(b));
  json c = a;
  c["sliding_window"] = nullptr;  // a global-attention layer
  EXPECT_NE(attrs_digest(a), attrs_digest(c));
  EXPECT_EQ(attrs_digest(json::object()), "");
  EXPECT_EQ(attrs_digest(json{{"training", false}}), "");
}

TEST(Canonical, ModuleSerialization) {
  EXPECT_EQ(serialize(canonical_module("LlamaMLP", "", {"aa", "bb"})),
            R"({"attrs":"","children":["aa","bb"],"kind":"module","name":"LlamaMLP","v":1})");
  EXPECT_EQ(dim_token(dim(3, taint::Kind::mix, "NUM_TOKS*head_dim", "16*NUM_TOKS")), "MIX:16*NUM_TOKS");
  EXPECT_EQ(dim_token(dim(3, taint::Kind::none, "layer_idx", "layer_idx")), "layer_idx");
  EXPECT_EQ(float_token(0.1), "0.1");
  EXPECT_EQ(float_token(1e-5), "1e-05");
}

// Phi-3.5-MoE's rotary factors come through torch.tensor(list): UNKNOWN:DATA dims. Two such ops on [1,T,16]
// and [1,T,32] are different work; hashing the dim by its reason alone merged them into one signature.
TEST(Canonical, UnknownDimsKeepTheirValue) {
  auto rotary = [](int64_t factors) {
    trace::OpRecord op;
    op.op = "mul";
    op.inputs = {{{dim(1, taint::Kind::none, "1", "1"), dim(521, taint::Kind::num_toks, "NUM_TOKS", "NUM_TOKS"),
                   dim(factors, taint::Kind::unknown, "DATA", "DATA")},
                  "float32",
                  std::nullopt}};
    op.outputs = op.inputs;
    return op;
  };
  EXPECT_EQ(dim_token(dim(16, taint::Kind::unknown, "DATA", "DATA")), "UNKNOWN:DATA=16");
  EXPECT_EQ(dim_token(dim(48, taint::Kind::unknown, "DATA*NUM_TOKS", "DATA*NUM_TOKS")), "UNKNOWN:DATA*NUM_TOKS=48");
  EXPECT_NE(sha256_hex(serialize(canonical_op(rotary(16), ""))), sha256_hex(serialize(canonical_op(rotary(32), ""))));
  EXPECT_EQ(sha256_hex(serialize(canonical_op(rotary(16), ""))), sha256_hex(serialize(canonical_op(rotary(16), ""))));
  trace::OpRecord s = rotary(16);
  s.scalars = {{"1", "int", 16, dim(16, taint::Kind::unknown, "DATA", "DATA")}};
  trace::OpRecord t = rotary(16);
  t.scalars = {{"1", "int", 32, dim(32, taint::Kind::unknown, "DATA", "DATA")}};
  EXPECT_NE(sha256_hex(serialize(canonical_op(s, ""))), sha256_hex(serialize(canonical_op(t, ""))))
      << "int scalars too";
}

}  // namespace
}  // namespace dooly::signature
