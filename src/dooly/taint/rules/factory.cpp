// Factories: the shape comes from size arguments (their labels), from another tensor (*_like), or from
// a range (arange: end - start, or ceildiv(end - start, step)).
#include "dooly/taint/rules/helpers.hpp"

namespace dooly::taint::rules {
namespace {

std::vector<Value> sized(RuleContext& c) { return {tensor(sizes_from(c, 0, "size"))}; }
std::vector<Value> sized_method(RuleContext& c) { return {tensor(sizes_from(c, 1, "size"))}; }
std::vector<Value> like(RuleContext& c) { return {tensor(tensor_at(c, 0, "input").dims)}; }

std::vector<Value> full(RuleContext& c) {
  const Value* s = c.call.arg(0, "size");
  if (!s) mismatch("full without size");
  return {tensor(int_list(*s))};
}
std::vector<Value> new_full(RuleContext& c) {
  const Value* s = c.call.arg(1, "size");
  if (!s) mismatch("new_full without size");
  return {tensor(int_list(*s))};
}

std::vector<Value> arange(RuleContext& c) {
  ExprPtr start = constant(0), end, step = constant(1);
  const size_t n_int = [&] {
    size_t n = 0;
    while (n < c.call.args.size() && c.call.args[n].is_int()) ++n;
    return n;
  }();
  if (n_int == 0 && has(c, 99, "end"))
    end = int_at(c, 99, "end");
  else if (n_int == 1)
    end = c.call.args[0].label;
  else if (n_int >= 2) {
    start = c.call.args[0].label;
    end = c.call.args[1].label;
  }
  if (n_int >= 3) step = c.call.args[2].label;
  if (!end) mismatch("arange with non-integer bounds");
  if (has(c, 99, "start")) start = int_at(c, 99, "start");
  if (has(c, 99, "step")) step = int_at(c, 99, "step");
  return {tensor({ceildiv(sub(end, start), step)})};
}

std::vector<Value> from_data(RuleContext& c) {
  // torch.tensor(python data): the length of a Python list is invisible to the taint tracker.
  std::vector<ExprPtr> dims;
  for (const auto& o : c.call.outputs)
    if (o.is_tensor()) {
      for (const auto& d : o.dims) dims.push_back(unknown(d->value(), "DATA"));
      if (o.rank())
        c.notes.push_back(c.call.op + ": tensor built from Python data; its sizes are data-dependent -> UNKNOWN");
      break;
    }
  return {tensor(dims)};
}

std::vector<Value> eye(RuleContext& c) {
  ExprPtr n = int_at(c, 0, "n");
  return {tensor({n, int_at(c, 1, "m", n)})};
}
std::vector<Value> linspace(RuleContext& c) { return {tensor({int_at(c, 2, "steps")})}; }

}  // namespace

void register_factory(RuleRegistry& r) {
  for (const char* op : {"empty", "zeros", "ones", "rand", "randn"}) r.add(op, "factory", sized);
  for (const char* op : {"new_empty", "new_zeros", "new_ones"}) r.add(op, "factory", sized_method);
  for (const char* op :
       {"empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like", "randint_like"})
    r.add(op, "factory", like);
  r.add("full", "factory", full);
  r.add("new_full", "factory", new_full);
  r.add("arange", "factory", arange);
  r.add("eye", "factory", eye);
  r.add("linspace", "factory", linspace);
  for (const char* op : {"tensor", "as_tensor", "new_tensor", "from_numpy", "asarray"}) r.add(op, "factory", from_data);
}

}  // namespace dooly::taint::rules
