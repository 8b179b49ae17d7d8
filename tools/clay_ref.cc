// Ceph's clay plugin (libec_clay.so, Ceph 16) measured single-threaded: encode, decode of
// m lost chunks and repair of one chunk from d helpers, the same operations and sizes as
// `kintsugi bench codec --code clay:K,M,D`, which runs this program between its own runs.
//
// Build (Debian: ceph-osd librados-dev libradospp-dev g++):
//   g++ -O2 -std=c++17 tools/clay_ref.cc -o clay_ref -rdynamic -ldl -lrados \
//       /usr/lib/x86_64-linux-gnu/ceph/libceph-common.so.2 -Wl,-rpath,/usr/lib/x86_64-linux-gnu/ceph
// Usage: CEPH_CONF=/dev/null ./clay_ref K M D CHUNK_BYTES SECONDS
//
// Ceph's plugin registry lives in its executables, not in a library, so this program
// provides the two registry calls the plugins make (add, factory) and nothing else.
#include <dlfcn.h>
#include <rados/buffer.h>
#include <rados/librados.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

class CephContext;
namespace ceph {
namespace global {
extern CephContext *g_ceph_context;
}
class ErasureCodeInterface;
using ErasureCodeProfile = std::map<std::string, std::string>;
using ErasureCodeInterfaceRef = std::shared_ptr<ErasureCodeInterface>;

// Same layout and virtual order as Ceph's ErasureCodePlugin.
class ErasureCodePlugin {
 public:
  void *library = nullptr;
  virtual ~ErasureCodePlugin() {}
  virtual int factory(const std::string &directory, ErasureCodeProfile &profile, ErasureCodeInterfaceRef *erasure_code,
                      std::ostream *ss) = 0;
};

class ErasureCodePluginRegistry {
 public:
  static ErasureCodePluginRegistry singleton;
  std::map<std::string, ErasureCodePlugin *> plugins;
  int add(const std::string &name, ErasureCodePlugin *plugin);
  int factory(const std::string &plugin_name, const std::string &directory, ErasureCodeProfile &profile,
              ErasureCodeInterfaceRef *erasure_code, std::ostream *ss);
};
ErasureCodePluginRegistry ErasureCodePluginRegistry::singleton;

int ErasureCodePluginRegistry::add(const std::string &name, ErasureCodePlugin *plugin) {
  plugins[name] = plugin;
  return 0;
}

int ErasureCodePluginRegistry::factory(const std::string &name, const std::string &directory, ErasureCodeProfile &profile,
                                       ErasureCodeInterfaceRef *erasure_code, std::ostream *ss) {
  if (!plugins.count(name)) {
    std::string path = directory + "/libec_" + name + ".so";
    void *lib = dlopen(path.c_str(), RTLD_NOW);
    if (!lib) {
      *ss << "dlopen " << path << ": " << dlerror();
      return -5;
    }
    auto init = (int (*)(const char *, const char *))dlsym(lib, "__erasure_code_init");
    if (!init || init(name.c_str(), directory.c_str()) != 0 || !plugins.count(name)) {
      *ss << path << " did not register";
      return -5;
    }
  }
  return plugins[name]->factory(directory, profile, erasure_code, ss);
}
}  // namespace ceph

// The clay implementation's own member functions, looked up in libec_clay.so once the
// registry has loaded it (called with the object as first argument, as the ABI passes it).
using ChunkMap = std::map<int, ceph::bufferlist>;
struct Clay {
  void *self;
  int (*encode_fn)(void *, const std::set<int> &, ChunkMap *);
  int (*decode_fn)(void *, const std::set<int> &, const ChunkMap &, ChunkMap *, int);
  unsigned (*chunk_size_fn)(const void *, unsigned);
  int encode_chunks(const std::set<int> &want, ChunkMap *encoded) { return encode_fn(self, want, encoded); }
  int decode(const std::set<int> &want, const ChunkMap &chunks, ChunkMap *decoded, int chunk_size) {
    return decode_fn(self, want, chunks, decoded, chunk_size);
  }
  unsigned get_chunk_size(unsigned object_size) const { return chunk_size_fn(self, object_size); }
};

static ceph::bufferlist aligned(const char *src, size_t len) {
  ceph::bufferptr p(ceph::buffer::create_aligned(len, 64));
  memcpy(p.c_str(), src, len);
  ceph::bufferlist bl;
  bl.push_back(std::move(p));
  return bl;
}

template <class F>
static double rate(double seconds, double bytes, F f) {
  f();
  auto start = std::chrono::steady_clock::now();
  long it = 0;
  for (;;) {
    f();
    it++;
    double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (t >= seconds) return it * bytes / t / 1e9;
  }
}

int main(int argc, char **argv) {
  if (argc != 6) {
    std::cerr << "usage: clay_ref K M D CHUNK_BYTES SECONDS" << std::endl;
    return 2;
  }
  int k = atoi(argv[1]), m = atoi(argv[2]), d = atoi(argv[3]);
  size_t len = strtoull(argv[4], nullptr, 10);
  double seconds = atof(argv[5]);
  rados_t cluster;
  if (rados_create(&cluster, nullptr) != 0) {
    std::cerr << "rados_create failed" << std::endl;
    return 1;
  }
  ceph::global::g_ceph_context = (CephContext *)rados_cct(cluster);

  ceph::ErasureCodeProfile profile = {{"plugin", "clay"},           {"k", std::to_string(k)},
                                      {"m", std::to_string(m)},       {"d", std::to_string(d)},
                                      {"scalar_mds", "isa"},          {"technique", "cauchy"}};
  ceph::ErasureCodeInterfaceRef ec;
  std::stringstream ss;
  int r = ceph::ErasureCodePluginRegistry::singleton.factory("clay", "/usr/lib/x86_64-linux-gnu/ceph/erasure-code", profile, &ec, &ss);
  if (r != 0 || !ec) {
    std::cerr << "clay plugin: " << r << " " << ss.str() << std::endl;
    return 1;
  }
  void *lib = dlopen("/usr/lib/x86_64-linux-gnu/ceph/erasure-code/libec_clay.so", RTLD_NOW | RTLD_NOLOAD);
  Clay c{ec.get(),
         (decltype(Clay::encode_fn))dlsym(lib, "_ZN15ErasureCodeClay13encode_chunksERKSt3setIiSt4lessIiESaIiEEPSt3mapIiN4ceph6buffer7v15_2_04listES2_SaISt4pairIKiSB_EEE"),
         (decltype(Clay::decode_fn))dlsym(lib, "_ZN15ErasureCodeClay6decodeERKSt3setIiSt4lessIiESaIiEERKSt3mapIiN4ceph6buffer7v15_2_04listES2_SaISt4pairIKiSB_EEEPSG_i"),
         (decltype(Clay::chunk_size_fn))dlsym(lib, "_ZNK15ErasureCodeClay14get_chunk_sizeEj")};
  if (!lib || !c.encode_fn || !c.decode_fn || !c.chunk_size_fn) {
    std::cerr << "libec_clay.so does not export the expected ErasureCodeClay members" << std::endl;
    return 1;
  }
  Clay *clay = &c;
  if (len % clay->get_chunk_size(1) != 0) {
    std::cerr << "chunk of " << len << " bytes is not a multiple of Ceph's " << clay->get_chunk_size(1) << std::endl;
    return 1;
  }
  int n = k + m;
  std::vector<std::string> data(n, std::string(len, '\0'));
  unsigned long long s = 0x2545F4914F6CDD1DULL;
  for (int i = 0; i < k; i++)
    for (size_t j = 0; j < len; j++) {
      s ^= s << 13;
      s ^= s >> 7;
      s ^= s << 17;
      data[i][j] = (char)s;
    }
  std::set<int> parity;
  for (int i = k; i < n; i++) parity.insert(i);
  auto fresh = [&](bool with_parity) {
    std::map<int, ceph::bufferlist> chunks;
    for (int i = 0; i < n; i++)
      if (i < k || with_parity) chunks[i] = aligned(data[i].data(), len);
    return chunks;
  };
  // Encode once for the parity the other operations need.
  {
    auto chunks = fresh(true);
    if (clay->encode_chunks(parity, &chunks) != 0) return 1;
    for (int i = k; i < n; i++) data[i] = chunks[i].to_str();
  }
  auto enc_chunks = fresh(true);
  double enc = rate(seconds, (double)k * len, [&] { clay->encode_chunks(parity, &enc_chunks); });

  // Decode: the first m chunks lost, from all the others.
  std::set<int> lost;
  for (int i = 0; i < m; i++) lost.insert(i);
  std::map<int, ceph::bufferlist> avail;
  for (int i = m; i < n; i++) avail[i] = aligned(data[i].data(), len);
  std::map<int, ceph::bufferlist> decoded;
  double dec = rate(seconds, (double)k * len, [&] {
    decoded.clear();
    clay->decode(lost, avail, &decoded, len);
  });
  for (int i : lost)
    if (decoded[i].to_str() != data[i]) {
      std::cerr << "Ceph's decode differs from the data" << std::endl;
      return 1;
    }

  // Repair chunk 0 from the d helpers kintsugi uses (its column, then the smallest
  // indices), each holding only its repair sub-chunks: the planes with digit y0 = x0.
  int q = d - k + 1, nu = (q - (k + m) % q) % q, t = (k + m + nu) / q, alpha = 1;
  for (int i = 0; i < t; i++) alpha *= q;
  size_t sub = len / alpha;
  int weight = alpha / q;  // digit 0 (column of node 0) is the most significant
  std::set<int> helpers;
  for (int i = 1; i < q; i++)
    if (i < k) helpers.insert(i);
    else if (i >= k + nu) helpers.insert(i - nu);
  for (int i = 1; i < n && (int)helpers.size() < d; i++) helpers.insert(i);
  std::map<int, ceph::bufferlist> reads;
  for (int h : helpers) {
    std::string part;
    for (int z = 0; z < alpha; z++)
      if ((z / weight) % q == 0) part += data[h].substr(z * sub, sub);
    reads[h] = aligned(part.data(), part.size());
  }
  std::set<int> want = {0};
  double rep = rate(seconds, (double)len, [&] {
    decoded.clear();
    clay->decode(want, reads, &decoded, len);
  });
  if (decoded[0].to_str() != data[0]) {
    std::cerr << "Ceph's repair differs from the data" << std::endl;
    return 1;
  }
  std::cout << "encode " << enc << "\ndecode " << dec << "\nrepair " << rep << std::endl;
  rados_shutdown(cluster);
  return 0;
}
