// Elementwise ops broadcast their tensor operands (right-aligned; partners of equal size whose labels
// disagree in kind are counted as conflicts). Shape-keeping ops (casts, norms, softmax, in-place fills)
// return their first tensor's shape. topk/sort keep the shape with the k label in the chosen dim.
#include "dooly/taint/rules/helpers.hpp"

namespace dooly::taint::rules {
namespace {

std::vector<Value> broadcast_all(RuleContext& c) {
  std::vector<const Value*> ts = c.call.tensor_args();
  if (ts.empty()) mismatch("no tensor operand");
  return {tensor(broadcast(c, ts))};
}

std::vector<Value> self_shaped(RuleContext& c) {
  std::vector<const Value*> ts = c.call.tensor_args();
  if (ts.empty()) mismatch("no tensor operand");
  std::vector<Value> out(c.call.outputs.size() ? c.call.outputs.size() : 1, tensor(ts.front()->dims));
  return out;
}

std::vector<Value> topk(RuleContext& c) {
  const Value& t = tensor_at(c, 0, "input");
  const ExprPtr k = int_at(c, 1, "k");
  const size_t d = norm_dim(int_at(c, 2, "dim", constant(-1))->value(), t.rank());
  std::vector<ExprPtr> dims = t.dims;
  dims[d] = k;
  return {tensor(dims), tensor(dims)};
}

std::vector<Value> one_hot(RuleContext& c) {
  const Value& t = tensor_at(c, 0, "input");
  std::vector<ExprPtr> dims = t.dims;
  const Value* n = c.call.arg(1, "num_classes");
  if (!n || !n->is_int() || n->int_value() < 0) mismatch("one_hot without explicit num_classes is data-dependent");
  dims.push_back(n->label);
  return {tensor(dims)};
}

}  // namespace

void register_elementwise(RuleRegistry& r) {
  for (const char* op :
       {"add",         "sub",        "mul",         "div",         "true_divide", "truediv",     "floor_divide",
        "floordiv",    "remainder",  "fmod",        "mod",         "pow",         "radd",        "rsub",
        "rmul",        "rtruediv",   "rdiv",        "rfloordiv",   "rpow",        "rmod",        "neg",
        "pos",         "abs",        "exp",         "exp2",        "expm1",       "log",         "log2",
        "log10",       "log1p",      "sqrt",        "rsqrt",       "square",      "sin",         "cos",
        "tan",         "tanh",       "sigmoid",     "silu",        "gelu",        "relu",        "relu6",
        "leaky_relu",  "elu",        "selu",        "celu",        "softplus",    "mish",        "hardswish",
        "hardsigmoid", "hardtanh",   "logsigmoid",  "erf",         "erfinv",      "reciprocal",  "sign",
        "sgn",         "clamp",      "clamp_min",   "clamp_max",   "clip",        "where",       "masked_fill",
        "maximum",     "minimum",    "fmax",        "fmin",        "eq",          "ne",          "lt",
        "le",          "gt",         "ge",          "logical_and", "logical_or",  "logical_not", "logical_xor",
        "bitwise_and", "bitwise_or", "bitwise_not", "bitwise_xor", "and",         "or",          "xor",
        "invert",      "lshift",     "rshift",      "lerp",        "addcmul",     "addcdiv",     "isnan",
        "isinf",       "isfinite",   "nan_to_num",  "round",       "floor",       "ceil",        "trunc",
        "frac",        "atan2",      "hypot",       "logaddexp",   "heaviside",   "copysign",    "xlogy",
        "float_power"})
    r.add(op, "elementwise", broadcast_all);
  for (const char* op : {"to",          "type",          "type_as",    "float",       "half",
                         "bfloat16",    "double",        "int",        "long",        "short",
                         "bool",        "byte",          "char",       "cpu",         "cuda",
                         "clone",       "contiguous",    "detach",     "copy",        "fill",
                         "zero",        "normal",        "uniform",    "exponential", "bernoulli",
                         "random",      "requires_grad", "pin_memory", "softmax",     "log_softmax",
                         "dropout",     "alpha_dropout", "rms_norm",   "layer_norm",  "group_norm",
                         "batch_norm",  "instance_norm", "normalize",  "cumsum",      "cumprod",
                         "cummax",      "cummin",        "triu",       "tril",        "sort",
                         "argsort",     "flip",          "roll",       "softmin",     "gumbel_softmax",
                         "log_sigmoid", "threshold"})
    r.add(op, "elementwise", self_shaped);
  r.add("topk", "elementwise", topk);
  r.add("one_hot", "elementwise", one_hot);
}

}  // namespace dooly::taint::rules
