// torch.save'd state dict reader (see torch_checkpoint.h). The unpickler is a stack machine over a
// flat arena of value nodes: it never recurses (a deep pickle cannot overflow our stack), nodes refer to
// each other by index (a cyclic pickle cannot leak or loop), and every read is bounds-checked.
#include "model/torch_checkpoint.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>
#include <sstream>
#include <unordered_map>
#include <utility>

#include "core/error.h"
#include "core/param_store.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "torch checkpoint reading assumes a little-endian host");

namespace bertrain {

namespace {

constexpr int kMaxNesting = 64;     // MARKs open at once, and containers inside containers
constexpr int kMaxDims = 16;        // tensor rank
constexpr std::size_t kMaxStack = 1 << 20;
// The legacy format's first pickle: PROTO 2, LONG1 of 10 bytes holding 0x1950a86a20f9469cfc6c.
constexpr uint8_t kLegacyMagic[] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
constexpr int64_t kLegacyProtocolVersion = 1001;

// ---- little-endian reads ------------------------------------------------------------------------------

template <typename T>
T load_le(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// ---- the value tree -------------------------------------------------------------------------------------

enum class Kind { None, Bool, Int, BigInt, Float, Str, Tuple, List, Dict, Global, Storage, Tensor };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::None: return "None";
    case Kind::Bool: return "a bool";
    case Kind::Int: return "an int";
    case Kind::BigInt: return "a long int";
    case Kind::Float: return "a float";
    case Kind::Str: return "a str";
    case Kind::Tuple: return "a tuple";
    case Kind::List: return "a list";
    case Kind::Dict: return "a dict";
    case Kind::Global: return "a global";
    case Kind::Storage: return "a storage";
    case Kind::Tensor: return "a tensor";
  }
  return "?";
}

struct Node {
  Kind kind = Kind::None;
  int64_t i = 0;                // Int, Bool; Storage: element count; Tensor: storage offset (elements)
  double f = 0;                 // Float
  std::string s;                // Str; BigInt: little-endian bytes; Global: "module.name"; Storage: key
  std::vector<int> items;       // Tuple, List; Dict: key, value, key, value, ...
  int depth = 0;                // containers: how deep the nesting below reaches
  DType dtype = DType::F32;     // Storage, Tensor
  int storage = -1;             // Tensor: the Storage node
  std::vector<int64_t> shape;   // Tensor
};

const std::set<std::string>& allowed_globals() {
  static const std::set<std::string> globals = {
      "collections.OrderedDict",   "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_tensor",
      "torch._utils._rebuild_parameter", "torch.FloatStorage",        "torch.HalfStorage",
      "torch.BFloat16Storage",     "torch.DoubleStorage",             "torch.LongStorage"};
  return globals;
}

bool storage_dtype(const std::string& global, DType* out) {
  if (global == "torch.FloatStorage") *out = DType::F32;
  else if (global == "torch.HalfStorage") *out = DType::F16;
  else if (global == "torch.BFloat16Storage") *out = DType::BF16;
  else if (global == "torch.DoubleStorage") *out = DType::F64;
  else if (global == "torch.LongStorage") *out = DType::I64;
  else return false;
  return true;
}

// One pickle, unpickled into `nodes`. `where` names the file (and the part of it) in every message.
class Unpickler {
 public:
  Unpickler(std::string where, const uint8_t* data, std::size_t size, std::vector<Node>* nodes)
      : where_(std::move(where)), data_(data), size_(size), nodes_(*nodes) {}

  // Runs to STOP; returns the result node. `end()` is then the offset after STOP.
  int run();
  std::size_t end() const { return pos_; }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    BERTRAIN_FAIL(where_ << ": " << what << " (pickle byte " << op_pos_ << ")");
  }
  const uint8_t* take(std::size_t n) {
    if (n > size_ - pos_) fail("truncated pickle: needs " + std::to_string(n) + " more bytes, " +
                               std::to_string(size_ - pos_) + " left");
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }
  std::string take_line() {
    const uint8_t* start = data_ + pos_;
    const void* nl = std::memchr(start, '\n', std::min<std::size_t>(size_ - pos_, 256));
    if (nl == nullptr) fail("truncated or overlong GLOBAL name");
    const std::size_t n = static_cast<const uint8_t*>(nl) - start;
    pos_ += n + 1;
    return std::string(reinterpret_cast<const char*>(start), n);
  }
  int add(Node n) {
    nodes_.push_back(std::move(n));
    return static_cast<int>(nodes_.size() - 1);
  }
  void push(int node) {
    if (stack_.size() >= kMaxStack) fail("pickle stack deeper than " + std::to_string(kMaxStack));
    stack_.push_back(node);
  }
  int pop() {
    if (stack_.size() <= stack_base()) fail("pickle stack underflow");
    const int v = stack_.back();
    stack_.pop_back();
    return v;
  }
  int top() {
    if (stack_.size() <= stack_base()) fail("pickle stack underflow");
    return stack_.back();
  }
  std::size_t stack_base() const { return marks_.empty() ? 0 : marks_.back(); }
  std::vector<int> pop_mark() {
    if (marks_.empty()) fail("MARK expected on the pickle stack");
    const std::size_t base = marks_.back();
    marks_.pop_back();
    std::vector<int> items(stack_.begin() + static_cast<std::ptrdiff_t>(base), stack_.end());
    stack_.resize(base);
    return items;
  }
  // Records `child` inside container `parent`, refusing self-containment and excessive depth.
  void nest(int parent, int child) {
    if (parent == child) fail("cyclic pickle: a container holds itself");
    Node& p = nodes_[parent];
    const int d = nodes_[child].depth + 1;
    if (d > kMaxNesting) fail("pickle nested deeper than " + std::to_string(kMaxNesting) + " containers");
    p.depth = std::max(p.depth, d);
  }
  int make_tuple(const std::vector<int>& items) {
    Node t;
    t.kind = Kind::Tuple;
    const int id = add(std::move(t));
    for (int c : items) nest(id, c);
    nodes_[id].items = items;
    return id;
  }
  void memo_put(uint32_t index) {
    const int v = top();
    memo_[index] = v;
  }
  int memo_get(uint32_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) fail("memo index " + std::to_string(index) + " was never stored");
    return it->second;
  }
  int64_t want_int(int node, const char* what) const {
    const Node& n = nodes_[node];
    if (n.kind != Kind::Int) fail(std::string(what) + " must be an int, found " + kind_name(n.kind));
    return n.i;
  }
  void set_items(int dict, const std::vector<int>& kv);
  int reduce(int callable, int args);
  int persistent_load(int pid);
  int rebuild_tensor(const std::vector<int>& args, bool v2);

  std::string where_;
  const uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
  std::size_t op_pos_ = 0;
  std::vector<Node>& nodes_;
  std::vector<int> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<uint32_t, int> memo_;
};

void Unpickler::set_items(int dict, const std::vector<int>& kv) {
  if (nodes_[dict].kind != Kind::Dict) fail(std::string("SETITEM(S) on ") + kind_name(nodes_[dict].kind));
  if (kv.size() % 2 != 0) fail("SETITEMS with an odd number of items");
  for (int c : kv) nest(dict, c);
  // Later keys replace earlier ones, as in Python; a state dict never repeats one, so refuse it.
  for (std::size_t k = 0; k < kv.size(); k += 2) {
    const Node& key = nodes_[kv[k]];
    if (key.kind == Kind::Str) {
      const std::vector<int>& have = nodes_[dict].items;
      for (std::size_t j = 0; j < have.size(); j += 2) {
        if (nodes_[have[j]].kind == Kind::Str && nodes_[have[j]].s == key.s) fail("dict key '" + key.s + "' set twice");
      }
    }
    nodes_[dict].items.push_back(kv[k]);
    nodes_[dict].items.push_back(kv[k + 1]);
  }
}

int Unpickler::persistent_load(int pid) {
  const Node& t = nodes_[pid];
  if (t.kind != Kind::Tuple || (t.items.size() != 5 && t.items.size() != 6)) {
    fail("persistent id must be ('storage', type, key, location, numel[, view]), found " +
         std::string(kind_name(t.kind)));
  }
  const std::vector<int> f = t.items;
  if (nodes_[f[0]].kind != Kind::Str || nodes_[f[0]].s != "storage") fail("persistent id is not a 'storage' record");
  Node s;
  s.kind = Kind::Storage;
  if (nodes_[f[1]].kind != Kind::Global || !storage_dtype(nodes_[f[1]].s, &s.dtype)) {
    fail("persistent id names no supported storage type");
  }
  if (nodes_[f[2]].kind != Kind::Str) fail("storage key must be a str");
  s.s = nodes_[f[2]].s;
  if (nodes_[f[3]].kind != Kind::Str) fail("storage location must be a str");
  s.i = want_int(f[4], "storage element count");
  if (s.i < 0) fail("negative storage element count");
  if (f.size() == 6 && nodes_[f[5]].kind != Kind::None) fail("storage views (pre-1.0 torch) are not supported");
  return add(std::move(s));
}

int Unpickler::rebuild_tensor(const std::vector<int>& args, bool v2) {
  const std::size_t want = v2 ? 6 : 4;
  if (args.size() < want || args.size() > want + 1) {
    fail("tensor rebuild takes " + std::to_string(want) + " arguments, found " + std::to_string(args.size()));
  }
  const Node& storage = nodes_[args[0]];
  if (storage.kind != Kind::Storage) fail(std::string("tensor storage must be a storage, found ") + kind_name(storage.kind));
  Node t;
  t.kind = Kind::Tensor;
  t.storage = args[0];
  t.dtype = storage.dtype;
  t.i = want_int(args[1], "tensor storage offset");
  if (t.i < 0) fail("negative tensor storage offset");
  const Node& size = nodes_[args[2]];
  const Node& stride = nodes_[args[3]];
  if (size.kind != Kind::Tuple || stride.kind != Kind::Tuple) fail("tensor size and stride must be tuples");
  if (size.items.size() != stride.items.size()) fail("tensor size and stride differ in length");
  if (size.items.size() > static_cast<std::size_t>(kMaxDims)) fail("tensor has more than 16 dimensions");
  std::vector<int64_t> strides;
  for (std::size_t d = 0; d < size.items.size(); ++d) {
    const int64_t n = want_int(size.items[d], "tensor dimension");
    const int64_t st = want_int(stride.items[d], "tensor stride");
    if (n < 0) fail("negative tensor dimension");
    t.shape.push_back(n);
    strides.push_back(st);
  }
  // Contiguous (row-major) only: strides of dimensions of size 1 do not matter, as in torch.
  int64_t expected = 1, numel = 1;
  for (std::size_t d = t.shape.size(); d-- > 0;) {
    if (t.shape[d] != 1 && strides[d] != expected) {
      fail("tensor with size " + shape_string(t.shape) + " has stride " + shape_string(strides) +
           "; only contiguous tensors are supported");
    }
    if (__builtin_mul_overflow(expected, t.shape[d], &expected)) fail("tensor size overflows");
  }
  numel = expected;
  int64_t extent = 0;
  if (numel > 0 && __builtin_add_overflow(t.i, numel, &extent)) fail("tensor extent overflows");
  if (numel > 0 && extent > storage.i) {
    fail("tensor of size " + shape_string(t.shape) + " at offset " + std::to_string(t.i) + " needs " +
         std::to_string(extent) + " elements but its storage '" + storage.s + "' has " + std::to_string(storage.i));
  }
  if (v2 && nodes_[args[4]].kind != Kind::Bool) fail("tensor requires_grad must be a bool");
  return add(std::move(t));
}

int Unpickler::reduce(int callable, int args) {
  const Node& c = nodes_[callable];
  if (c.kind != Kind::Global) fail(std::string("REDUCE on ") + kind_name(c.kind) + ", expected a global");
  if (nodes_[args].kind != Kind::Tuple) fail("REDUCE arguments must be a tuple");
  const std::vector<int> a = nodes_[args].items;
  if (c.s == "collections.OrderedDict") {
    if (!a.empty()) fail("OrderedDict() with arguments");
    Node d;
    d.kind = Kind::Dict;
    return add(std::move(d));
  }
  if (c.s == "torch._utils._rebuild_tensor_v2") return rebuild_tensor(a, true);
  if (c.s == "torch._utils._rebuild_tensor") return rebuild_tensor(a, false);
  if (c.s == "torch._utils._rebuild_parameter") {
    if (a.size() != 3 || nodes_[a[0]].kind != Kind::Tensor) fail("_rebuild_parameter(tensor, requires_grad, hooks) expected");
    return a[0];
  }
  fail("'" + c.s + "' cannot be called");
}

int Unpickler::run() {
  while (true) {
    op_pos_ = pos_;
    const uint8_t op = *take(1);
    switch (op) {
      case 0x80: {  // PROTO
        const uint8_t v = *take(1);
        if (v < 2 || v > 5) fail("pickle protocol " + std::to_string(v) + " (expected 2 to 5)");
        break;
      }
      case 0x95:  // FRAME: a length hint only
        take(8);
        break;
      case '.': {  // STOP
        const int result = pop();
        if (!marks_.empty() || !stack_.empty()) fail("pickle ends with items left on the stack");
        return result;
      }
      case '(':  // MARK
        if (marks_.size() >= static_cast<std::size_t>(kMaxNesting)) {
          fail("pickle nested deeper than " + std::to_string(kMaxNesting) + " MARKs");
        }
        marks_.push_back(stack_.size());
        break;
      case '}': case ']': case ')': {
        Node n;
        n.kind = op == '}' ? Kind::Dict : op == ']' ? Kind::List : Kind::Tuple;
        push(add(std::move(n)));
        break;
      }
      case 't':
        push(make_tuple(pop_mark()));
        break;
      case 0x85: case 0x86: case 0x87: {  // TUPLE1..3
        const std::size_t n = op - 0x84u;
        std::vector<int> items(n);
        for (std::size_t k = n; k-- > 0;) items[k] = pop();
        push(make_tuple(items));
        break;
      }
      case 'X': case 0x8c: case 0x8d: case 'U': case 'T': {  // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8, (SHORT_)BINSTRING
        uint64_t n = 0;
        if (op == 'X' || op == 'T') n = load_le<uint32_t>(take(4));
        else if (op == 0x8d) n = load_le<uint64_t>(take(8));
        else n = *take(1);
        if (n > size_ - pos_) fail("truncated pickle: string of " + std::to_string(n) + " bytes");
        Node s;
        s.kind = Kind::Str;
        s.s.assign(reinterpret_cast<const char*>(take(static_cast<std::size_t>(n))), static_cast<std::size_t>(n));
        push(add(std::move(s)));
        break;
      }
      case 'J': case 'K': case 'M': {  // BININT, BININT1, BININT2
        Node n;
        n.kind = Kind::Int;
        n.i = op == 'J' ? load_le<int32_t>(take(4)) : op == 'K' ? *take(1) : load_le<uint16_t>(take(2));
        push(add(std::move(n)));
        break;
      }
      case 0x8a: {  // LONG1
        const uint8_t n = *take(1);
        const uint8_t* p = take(n);
        Node v;
        if (n <= 8) {
          uint64_t u = 0;
          for (int k = 0; k < n; ++k) u |= static_cast<uint64_t>(p[k]) << (8 * k);
          if (n > 0 && n < 8 && (p[n - 1] & 0x80)) u |= ~uint64_t{0} << (8 * n);  // sign-extend
          v.kind = Kind::Int;
          v.i = static_cast<int64_t>(u);
        } else {
          v.kind = Kind::BigInt;
          v.s.assign(reinterpret_cast<const char*>(p), n);
        }
        push(add(std::move(v)));
        break;
      }
      case 'G': {  // BINFLOAT, big-endian
        const uint8_t* p = take(8);
        uint64_t u = 0;
        for (int k = 0; k < 8; ++k) u = (u << 8) | p[k];
        Node v;
        v.kind = Kind::Float;
        std::memcpy(&v.f, &u, sizeof u);
        push(add(std::move(v)));
        break;
      }
      case 0x88: case 0x89: {  // NEWTRUE, NEWFALSE
        Node v;
        v.kind = Kind::Bool;
        v.i = op == 0x88;
        push(add(std::move(v)));
        break;
      }
      case 'N':
        push(add(Node{}));
        break;
      case 'c': case 0x93: {  // GLOBAL, STACK_GLOBAL
        std::string module, name;
        if (op == 'c') {
          module = take_line();
          name = take_line();
        } else {
          const Node& n = nodes_[pop()];
          const Node& m = nodes_[pop()];
          if (m.kind != Kind::Str || n.kind != Kind::Str) fail("STACK_GLOBAL needs two strings");
          module = m.s;
          name = n.s;
        }
        const std::string global = module + "." + name;
        if (!allowed_globals().count(global)) {
          std::string shown = global.substr(0, 80);
          for (char& ch : shown) {
            if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) >= 0x7f) ch = '?';
          }
          fail("pickle references the global '" + shown +
               "', which a state dict never needs; refusing to load it (allowed: collections.OrderedDict, "
               "torch._utils._rebuild_tensor(_v2), torch._utils._rebuild_parameter, torch.*Storage)");
        }
        Node g;
        g.kind = Kind::Global;
        g.s = global;
        push(add(std::move(g)));
        break;
      }
      case 'Q':  // BINPERSID
        push(persistent_load(pop()));
        break;
      case 'R': {  // REDUCE
        const int args = pop();
        const int callable = pop();
        push(reduce(callable, args));
        break;
      }
      case 'b': {  // BUILD: the state dict's _metadata; kept out of the result
        pop();
        const Node& obj = nodes_[top()];
        if (obj.kind != Kind::Dict) fail(std::string("BUILD on ") + kind_name(obj.kind) + ", expected an OrderedDict");
        break;
      }
      case 's': {  // SETITEM
        const int value = pop();
        const int key = pop();
        set_items(top(), {key, value});
        break;
      }
      case 'u': {  // SETITEMS
        const std::vector<int> kv = pop_mark();
        set_items(top(), kv);
        break;
      }
      case 'a': case 'e': {  // APPEND, APPENDS
        const std::vector<int> items = op == 'a' ? std::vector<int>{pop()} : pop_mark();
        const int list = top();
        if (nodes_[list].kind != Kind::List) fail(std::string("APPEND on ") + kind_name(nodes_[list].kind));
        for (int c : items) nest(list, c);
        for (int c : items) nodes_[list].items.push_back(c);
        break;
      }
      case 'q': memo_put(*take(1)); break;                     // BINPUT
      case 'r': memo_put(load_le<uint32_t>(take(4))); break;   // LONG_BINPUT
      case 0x94: memo_put(static_cast<uint32_t>(memo_.size())); break;  // MEMOIZE
      case 'h': push(memo_get(*take(1))); break;               // BINGET
      case 'j': push(memo_get(load_le<uint32_t>(take(4)))); break;  // LONG_BINGET
      default: {
        std::ostringstream os;
        os << "pickle opcode 0x" << std::hex << static_cast<int>(op) << std::dec;
        if (op >= 0x20 && op < 0x7f) os << " ('" << static_cast<char>(op) << "')";
        os << " is not one torch.save emits for a state dict";
        fail(os.str());
      }
    }
  }
}

// ---- zip ------------------------------------------------------------------------------------------------

struct ZipEntry {
  uint64_t offset = 0;  // of the data in the file
  uint64_t size = 0;
};

// Central directory of a zip whose entries are all stored; data offsets from the local headers.
std::map<std::string, ZipEntry> read_zip(const std::string& path, const uint8_t* data, uint64_t size) {
  auto need = [&](uint64_t at, uint64_t n, const char* what) {
    BERTRAIN_CHECK(at <= size && n <= size - at, path << ": truncated zip: " << what << " at byte " << at
                                                      << " runs past the end of the " << size << "-byte file");
  };
  // End of central directory: 22 bytes plus a comment of up to 64 KiB, at the end of the file.
  BERTRAIN_CHECK(size >= 22, path << ": truncated zip: " << size << " bytes, no end of central directory");
  uint64_t eocd = size;
  for (uint64_t at = size - 22 + 1; at-- > 0 && size - at <= 22 + 65535;) {
    if (load_le<uint32_t>(data + at) == 0x06054b50u) {
      eocd = at;
      break;
    }
  }
  BERTRAIN_CHECK(eocd != size, path << ": truncated or corrupt zip: no end of central directory record");
  uint64_t count = load_le<uint16_t>(data + eocd + 10);
  uint64_t cd_size = load_le<uint32_t>(data + eocd + 12);
  uint64_t cd_offset = load_le<uint32_t>(data + eocd + 16);
  if (count == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_offset == 0xFFFFFFFFu) {  // ZIP64
    BERTRAIN_CHECK(eocd >= 20 && load_le<uint32_t>(data + eocd - 20) == 0x07064b50u,
                   path << ": corrupt zip: ZIP64 sizes without a ZIP64 locator");
    const uint64_t z = load_le<uint64_t>(data + eocd - 20 + 8);
    need(z, 56, "ZIP64 end of central directory");
    BERTRAIN_CHECK(load_le<uint32_t>(data + z) == 0x06064b50u, path << ": corrupt zip: bad ZIP64 end record");
    count = load_le<uint64_t>(data + z + 32);
    cd_size = load_le<uint64_t>(data + z + 40);
    cd_offset = load_le<uint64_t>(data + z + 48);
  }
  need(cd_offset, cd_size, "central directory");
  std::map<std::string, ZipEntry> entries;
  uint64_t at = cd_offset;
  for (uint64_t e = 0; e < count; ++e) {
    need(at, 46, "central directory entry");
    BERTRAIN_CHECK(load_le<uint32_t>(data + at) == 0x02014b50u,
                   path << ": corrupt zip: bad central directory entry " << e << " at byte " << at);
    const uint16_t flags = load_le<uint16_t>(data + at + 8);
    const uint16_t method = load_le<uint16_t>(data + at + 10);
    uint64_t csize = load_le<uint32_t>(data + at + 20);
    uint64_t usize = load_le<uint32_t>(data + at + 24);
    const uint16_t name_len = load_le<uint16_t>(data + at + 28);
    const uint16_t extra_len = load_le<uint16_t>(data + at + 30);
    const uint16_t comment_len = load_le<uint16_t>(data + at + 32);
    uint64_t local = load_le<uint32_t>(data + at + 42);
    need(at + 46, uint64_t{name_len} + extra_len + comment_len, "central directory entry name");
    const std::string name(reinterpret_cast<const char*>(data + at + 46), name_len);
    // ZIP64 extra field: the 64-bit values of exactly those fields that are 0xFFFFFFFF, in this order.
    const uint8_t* x = data + at + 46 + name_len;
    for (uint32_t k = 0; k + 4 <= extra_len;) {
      const uint16_t id = load_le<uint16_t>(x + k);
      const uint16_t len = load_le<uint16_t>(x + k + 2);
      BERTRAIN_CHECK(k + 4 + len <= extra_len, path << ": corrupt zip: extra field of '" << name << "' overruns");
      if (id == 0x0001) {
        uint32_t p = k + 4;
        auto next64 = [&](uint64_t* v) {
          BERTRAIN_CHECK(p + 8 <= k + 4u + len, path << ": corrupt zip: short ZIP64 field of '" << name << "'");
          *v = load_le<uint64_t>(x + p);
          p += 8;
        };
        if (usize == 0xFFFFFFFFu) next64(&usize);
        if (csize == 0xFFFFFFFFu) next64(&csize);
        if (local == 0xFFFFFFFFu) next64(&local);
      }
      k += 4u + len;
    }
    BERTRAIN_CHECK(method == 0, path << ": zip entry '" << name << "' is compressed (method " << method
                                     << "); torch.save stores entries uncompressed");
    BERTRAIN_CHECK((flags & 1) == 0, path << ": zip entry '" << name << "' is encrypted");
    BERTRAIN_CHECK(csize == usize, path << ": zip entry '" << name << "' is stored but its sizes differ (" << csize
                                        << " vs " << usize << ")");
    need(local, 30, "local file header");
    BERTRAIN_CHECK(load_le<uint32_t>(data + local) == 0x04034b50u,
                   path << ": corrupt zip: no local file header for '" << name << "' at byte " << local);
    const uint16_t lname = load_le<uint16_t>(data + local + 26);
    const uint16_t lextra = load_le<uint16_t>(data + local + 28);
    need(local + 30, lname, "local file name");
    BERTRAIN_CHECK(lname == name_len && std::memcmp(data + local + 30, name.data(), name_len) == 0,
                   path << ": corrupt zip: local header name differs from the central directory's for '" << name << "'");
    const uint64_t begin = local + 30 + lname + lextra;
    need(begin, csize, ("data of zip entry '" + name + "'").c_str());
    BERTRAIN_CHECK(entries.emplace(name, ZipEntry{begin, csize}).second,
                   path << ": zip entry '" << name << "' appears twice");
    at += 46 + uint64_t{name_len} + extra_len + comment_len;
  }
  return entries;
}

}  // namespace

int64_t TorchTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // checked when the tensor was read
  return n;
}

bool looks_like_torch_checkpoint(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  uint8_t head[13] = {};
  const ssize_t n = ::read(fd, head, sizeof head);
  ::close(fd);
  if (n >= 4 && std::memcmp(head, "PK\x03\x04", 4) == 0) return true;
  // PROTO 2..5, then (protocol 4 and 5) a FRAME opcode with its 8-byte length, then LONG1 of 10 bytes.
  if (n < 4 || head[0] != 0x80 || head[1] < 2 || head[1] > 5) return false;
  const std::size_t magic = head[1] >= 4 && head[2] == 0x95 ? 11 : 2;
  return n >= static_cast<ssize_t>(magic + 2) && head[magic] == 0x8a && head[magic + 1] == 0x0a;
}

TorchCheckpoint::TorchCheckpoint(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  BERTRAIN_CHECK(fd >= 0, path << ": cannot open: " << std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    BERTRAIN_FAIL(path << ": not a regular file");
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    void* map = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);
    BERTRAIN_CHECK(map != MAP_FAILED, path << ": cannot mmap " << size_ << " bytes: " << std::strerror(err));
    map_ = static_cast<const uint8_t*>(map);
  } else {
    ::close(fd);
  }
  try {
    std::vector<Node> nodes;
    int root = -1;
    // Storage key -> (byte offset in the file, bytes available).
    std::map<std::string, std::pair<uint64_t, uint64_t>> storages;
    if (size_ >= 4 && std::memcmp(map_, "PK\x03\x04", 4) == 0) {
      zip_ = true;
      const std::map<std::string, ZipEntry> entries = read_zip(path, map_, size_);
      std::string prefix;
      int found = 0;
      for (const auto& [name, e] : entries) {
        const std::size_t slash = name.find('/');
        if (slash != std::string::npos && name.compare(slash, std::string::npos, "/data.pkl") == 0) {
          prefix = name.substr(0, slash + 1);
          ++found;
        }
      }
      BERTRAIN_CHECK(found == 1, path << ": zip holds " << found << " '<name>/data.pkl' entries; expected one");
      const auto order = entries.find(prefix + "byteorder");
      if (order != entries.end()) {
        const std::string value(reinterpret_cast<const char*>(map_ + order->second.offset), order->second.size);
        BERTRAIN_CHECK(value == "little", path << ": byteorder is '" << value.substr(0, 16)
                                               << "'; only little-endian checkpoints are supported");
      }
      const ZipEntry& pkl = entries.at(prefix + "data.pkl");
      Unpickler u(path + ": " + prefix + "data.pkl", map_ + pkl.offset, pkl.size, &nodes);
      root = u.run();
      for (const auto& [name, e] : entries) {
        if (name.compare(0, prefix.size() + 5, prefix + "data/") == 0) {
          storages[name.substr(prefix.size() + 5)] = {e.offset, e.size};
        }
      }
    } else if (size_ >= 2 && map_[0] == 0x80) {
      // Legacy: magic, protocol version, sys_info, the state dict, the storage keys, then the storages.
      std::size_t pos = 0;
      auto next_pickle = [&](const char* what) {
        Unpickler u(path + ": " + what, map_ + pos, size_ - pos, &nodes);
        const int v = u.run();
        pos += u.end();
        return v;
      };
      const Node magic = nodes[next_pickle("magic number")];
      BERTRAIN_CHECK(magic.kind == Kind::BigInt && magic.s.size() == sizeof kLegacyMagic &&
                         std::memcmp(magic.s.data(), kLegacyMagic, sizeof kLegacyMagic) == 0,
                     path << ": not a torch checkpoint: the first pickle is not torch's magic number "
                             "0x1950a86a20f9469cfc6c");
      const Node version = nodes[next_pickle("protocol version")];
      BERTRAIN_CHECK(version.kind == Kind::Int && version.i == kLegacyProtocolVersion,
                     path << ": legacy torch format with protocol version other than 1001");
      const Node sys_info = nodes[next_pickle("sys_info")];
      BERTRAIN_CHECK(sys_info.kind == Kind::Dict, path << ": sys_info is not a dict");
      for (std::size_t k = 0; k + 1 < sys_info.items.size(); k += 2) {
        const Node& key = nodes[sys_info.items[k]];
        const Node& value = nodes[sys_info.items[k + 1]];
        if (key.kind == Kind::Str && key.s == "little_endian") {
          BERTRAIN_CHECK(value.kind == Kind::Bool && value.i == 1,
                         path << ": written on a big-endian machine; only little-endian checkpoints are supported");
        }
      }
      root = next_pickle("state dict");
      const Node keys = nodes[next_pickle("storage keys")];
      BERTRAIN_CHECK(keys.kind == Kind::List, path << ": the storage key list is " << kind_name(keys.kind));
      // The element size of each key comes from the persistent ids that named it.
      std::map<std::string, DType> dtype_of;
      for (const Node& n : nodes) {
        if (n.kind == Kind::Storage) dtype_of.emplace(n.s, n.dtype);
      }
      for (int k : keys.items) {
        BERTRAIN_CHECK(nodes[k].kind == Kind::Str, path << ": a storage key is " << kind_name(nodes[k].kind));
        const std::string& key = nodes[k].s;
        const auto dt = dtype_of.find(key);
        BERTRAIN_CHECK(dt != dtype_of.end(), path << ": storage '" << key << "' is listed but no tensor uses it");
        BERTRAIN_CHECK(size_ - pos >= 8, path << ": truncated: storage '" << key << "' has no element count");
        const int64_t count = load_le<int64_t>(map_ + pos);
        pos += 8;
        uint64_t nbytes = 0;
        BERTRAIN_CHECK(count >= 0 && !__builtin_mul_overflow(static_cast<uint64_t>(count), dtype_size(dt->second), &nbytes),
                       path << ": storage '" << key << "' has an invalid element count " << count);
        BERTRAIN_CHECK(nbytes <= size_ - pos, path << ": truncated: storage '" << key << "' needs " << nbytes
                                                   << " bytes at byte " << pos << " but the file has " << size_ - pos
                                                   << " left");
        BERTRAIN_CHECK(storages.emplace(key, std::make_pair(uint64_t{pos}, nbytes)).second,
                       path << ": storage '" << key << "' listed twice");
        pos += nbytes;
      }
    } else {
      BERTRAIN_FAIL(path << ": not a torch checkpoint: expected a zip (PK\\x03\\x04) or a legacy pickle (0x80) "
                            "at its start");
    }

    // The state dict: an OrderedDict of name -> tensor.
    const Node& dict = nodes[root];
    BERTRAIN_CHECK(dict.kind == Kind::Dict, path << ": the checkpoint holds " << kind_name(dict.kind)
                                                 << ", expected a state dict (an OrderedDict of tensors)");
    std::map<std::string, DType> storage_dtype_seen;
    for (std::size_t k = 0; k + 1 < dict.items.size(); k += 2) {
      const Node& key = nodes[dict.items[k]];
      const Node& value = nodes[dict.items[k + 1]];
      BERTRAIN_CHECK(key.kind == Kind::Str, path << ": state dict key is " << kind_name(key.kind) << ", expected a str");
      BERTRAIN_CHECK(value.kind == Kind::Tensor,
                     path << ": state dict entry '" << key.s << "' is " << kind_name(value.kind) << ", expected a tensor");
      const Node& storage = nodes[value.storage];
      const auto [seen, first] = storage_dtype_seen.emplace(storage.s, storage.dtype);
      BERTRAIN_CHECK(first || seen->second == storage.dtype,
                     path << ": storage '" << storage.s << "' is used with two element types");
      const auto st = storages.find(storage.s);
      BERTRAIN_CHECK(st != storages.end(), path << ": tensor '" << key.s << "': storage '" << storage.s
                                                << "' is missing from the file");
      const uint64_t elem = dtype_size(storage.dtype);
      uint64_t storage_bytes = 0;
      BERTRAIN_CHECK(!__builtin_mul_overflow(static_cast<uint64_t>(storage.i), elem, &storage_bytes) &&
                         st->second.second == storage_bytes,
                     path << ": tensor '" << key.s << "': storage '" << storage.s << "' holds " << st->second.second
                          << " bytes but its record says " << storage.i << " elements of " << elem << " bytes");
      TorchTensorInfo info;
      info.name = key.s;
      info.dtype = storage.dtype;
      info.shape = value.shape;
      info.file_offset = st->second.first + static_cast<uint64_t>(value.i) * elem;
      BERTRAIN_CHECK(index_.emplace(info.name, tensors_.size()).second,
                     path << ": state dict key '" << info.name << "' appears twice");
      tensors_.push_back(std::move(info));
    }
  } catch (...) {
    if (map_ != nullptr) ::munmap(const_cast<uint8_t*>(map_), size_);
    map_ = nullptr;
    throw;
  }
}

TorchCheckpoint::~TorchCheckpoint() {
  if (map_ != nullptr) ::munmap(const_cast<uint8_t*>(map_), size_);
}

const TorchTensorInfo& TorchCheckpoint::info(const std::string& name) const {
  const auto it = index_.find(name);
  BERTRAIN_CHECK(it != index_.end(), path_ << ": no tensor named '" << name << "'");
  return tensors_[it->second];
}

std::vector<float> TorchCheckpoint::read_float(const std::string& name) const {
  std::vector<float> out(static_cast<std::size_t>(info(name).numel()));
  read_float_into(name, out.data(), out.size());
  return out;
}

void TorchCheckpoint::read_float_into(const std::string& name, float* out, std::size_t count) const {
  const TorchTensorInfo& t = info(name);
  BERTRAIN_CHECK(dtype_is_float(t.dtype), path_ << ": tensor '" << name << "' has dtype " << dtype_name(t.dtype)
                                                << "; expected a floating-point tensor");
  const std::size_t n = static_cast<std::size_t>(t.numel());
  BERTRAIN_CHECK(count == n, path_ << ": tensor '" << name << "' has " << n << " elements but the destination holds "
                                   << count);
  decode_floats(t.dtype, map_ + t.file_offset, n, out);
}

}  // namespace bertrain
