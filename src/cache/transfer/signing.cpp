#include "tvmffi_jit/cache/transfer/signing.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fork_safe.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cache {

namespace {

// A key file is one short line; anything longer is not one of ours.
constexpr uint64_t kMaxKeyFileBytes = 4096;

// The statically linked libcrypto would otherwise read the build machine's
// openssl.cnf (and load whatever providers it names) on another system.
// ed25519 through EVP_PKEY needs neither the legacy cipher nor the digest
// name tables (SHA-256 is called directly, util/hash.cpp): filling them was
// most of the ~1 ms a first signature check cost (docs/benchmarks.md). Nor
// is what it set up freed at exit one allocation at a time (the kernel takes
// the whole process back): that was a few hundred µs at the end of a hit.
void init_crypto() {
  static const bool done =
      OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG | OPENSSL_INIT_NO_ADD_ALL_CIPHERS |
                              OPENSSL_INIT_NO_ADD_ALL_DIGESTS | OPENSSL_INIT_NO_ATEXIT,
                          nullptr) == 1;
  if (!done) throw io_error("OpenSSL could not be initialised");
}

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;

const unsigned char* bytes(const std::string& s) { return reinterpret_cast<const unsigned char*>(s.data()); }

std::string public_from_seed(const std::string& seed) {
  init_crypto();
  Pkey k(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, bytes(seed), seed.size()));
  if (!k) throw io_error("OpenSSL cannot make an ed25519 key");
  std::string pub(kEd25519PublicKeyBytes, '\0');
  size_t n = pub.size();
  if (EVP_PKEY_get_raw_public_key(k.get(), reinterpret_cast<unsigned char*>(pub.data()), &n) != 1 ||
      n != kEd25519PublicKeyBytes)
    throw io_error("OpenSSL cannot derive an ed25519 public key");
  return pub;
}

void append_field(std::string& out, const std::string& tag, const std::string& value) {
  out += tag;
  out.push_back('\0');
  out += std::to_string(value.size());
  out.push_back('\0');
  out += value;
  out.push_back('\0');
}

// "NAME:BASE64" from a key file: the name and the decoded bytes. Every
// failure names the file and what to do.
std::pair<std::string, std::string> read_key_line(const std::string& file, const char* kind, size_t want_bytes,
                                                  const char* advice) {
  auto fail = [&](const std::string& why) -> Error {
    return usage_error(std::string(kind) + " key file " + quote_for_message(file) + " " + why + "; " + advice);
  };
  uint64_t size = 0;
  int fd;
  try {
    fd = util::open_for_reading(file, &size);  // refuses FIFOs and devices before any read
  } catch (const Error& e) {
    throw fail(std::string("cannot be read (") + e.what() + ")");
  }
  std::string text;
  if (size <= kMaxKeyFileBytes) {
    text.resize(static_cast<size_t>(kMaxKeyFileBytes) + 1);
    size_t got = 0;
    while (got < text.size()) {
      auto n = util::read_some(fd, text.data() + got, text.size() - got);
      if (!n || *n == 0) break;
      got += *n;
    }
    text.resize(got);
  }
  ::close(fd);
  if (size > kMaxKeyFileBytes || text.size() > kMaxKeyFileBytes)
    throw fail("is larger than " + std::to_string(kMaxKeyFileBytes) + " bytes, so it is not a key file");
  std::string line(util::trim(text));
  size_t colon = line.find(':');
  if (line.empty() || line.find('\n') != std::string::npos || colon == std::string::npos)
    throw fail("is not one line NAME:BASE64");
  std::string name = line.substr(0, colon);
  if (!is_valid_entry_name(name)) throw fail("names the key " + quote_for_message(name) + ", not a plain name");
  auto raw = util::base64_decode(line.substr(colon + 1));
  if (!raw) throw fail("does not hold base64 after 'NAME:'");
  if (raw->size() != want_bytes)
    throw fail("holds " + std::to_string(raw->size()) + " key bytes, not the " + std::to_string(want_bytes) +
               " of an ed25519 " + kind + " key");
  return {name, *raw};
}

// O_EXCL|O_NOFOLLOW: never through a planted symlink, never over a key.
void create_key_file(const std::string& path, const std::string& content, unsigned mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) {
    int e = errno;
    if (e == EEXIST || e == ELOOP)
      throw usage_error(quote_for_message(path) + " already exists: keygen never overwrites a key; " +
                        "choose another NAME or --out DIR, or remove it first");
    throw io_error(errno_message("cannot create the key file " + quote_for_message(path), e) +
                   "; give --out a directory you can write");
  }
  ::fchmod(fd, mode);  // whatever the umask
  if (auto written = util::write_all(fd, content); !written) {
    ::close(fd);
    ::unlink(path.c_str());
    throw io_error("cannot write the key file " + quote_for_message(path) + ": " + written.why());
  }
  if (::close(fd) != 0) {
    int e = errno;
    ::unlink(path.c_str());
    throw io_error(errno_message("cannot write the key file " + quote_for_message(path), e));
  }
}

}  // namespace

KeyPairFiles generate_key_pair(const std::string& name, const std::string& out_dir) {
  if (!is_valid_entry_name(name))
    throw usage_error("key name " + quote_for_message(name) +
                      ": use 1-128 characters from [A-Za-z0-9_.-], not starting with '.' (it names the files and "
                      "every signature)");
  if (!util::is_directory(out_dir))
    throw usage_error("--out " + quote_for_message(out_dir) + " is not a directory; create it first");
  init_crypto();
  SecretKey k;
  k.name = name;
  k.seed.assign(kEd25519SeedBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(k.seed.data()), static_cast<int>(k.seed.size())) != 1)
    throw io_error("OpenSSL could not produce random bytes for a key");
  k.public_key = public_from_seed(k.seed);
  KeyPairFiles f{util::join_path(out_dir, name + ".sec"), util::join_path(out_dir, name + ".pub")};
  // Both names are checked free before either is written, so a refusal
  // leaves nothing behind; O_EXCL still decides any race.
  for (const auto* p : {&f.secret_file, &f.public_file})
    if (util::path_exists(*p))
      throw usage_error(quote_for_message(*p) + " already exists: keygen never overwrites a key; " +
                        "choose another NAME or --out DIR, or remove it first");
  create_key_file(f.secret_file, name + ":" + util::base64_encode(k.seed + k.public_key) + "\n", 0600);
  try {
    create_key_file(f.public_file, name + ":" + util::base64_encode(k.public_key) + "\n", 0644);
  } catch (...) {
    ::unlink(f.secret_file.c_str());
    throw;
  }
  return f;
}

SecretKey read_secret_key(const std::string& file) {
  auto [name, raw] = read_key_line(file, "secret", kEd25519SeedBytes + kEd25519PublicKeyBytes,
                                   "give the NAME.sec file `tvmffi-jit cache keygen NAME --out DIR` wrote");
  SecretKey k{name, raw.substr(0, kEd25519SeedBytes), raw.substr(kEd25519SeedBytes)};
  if (public_from_seed(k.seed) != k.public_key)
    throw usage_error("secret key file " + quote_for_message(file) +
                      " is damaged (its public half is not the one its private half derives); make a new key pair "
                      "with `tvmffi-jit cache keygen`");
  // As ssh does with a private key: one that others may read is refused, not
  // used (whoever can read it can sign entries every reader trusts).
  struct stat st;
  if (::stat(file.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw usage_error("secret key file " + quote_for_message(file) + " has mode " + mode +
                      ": it is accessible by others, so it is not used; `chmod 600 " + quote_for_message(file) +
                      "` (as ssh requires of a private key)");
  }
  return k;
}

PublicKey read_public_key(const std::string& file) {
  auto [name, raw] = read_key_line(file, "public", kEd25519PublicKeyBytes,
                                   "give the NAME.pub file `tvmffi-jit cache keygen NAME --out DIR` wrote");
  return PublicKey{name, raw, file};
}

std::string signed_message(const std::string& signer, const std::string& portable_key,
                           const std::string& manifest_digest) {
  std::string m;
  append_field(m, "domain", "tvmffi-jit entry signature v1");
  append_field(m, "signer", signer);
  append_field(m, "portable_key", portable_key);
  append_field(m, "manifest_digest", manifest_digest);
  return m;
}

std::string local_signed_message(const std::string& signer, const std::string& key, const std::string& record_digest) {
  std::string m;
  append_field(m, "domain", "tvmffi-jit local entry signature v1");
  append_field(m, "signer", signer);
  append_field(m, "key", key);
  append_field(m, "record_digest", record_digest);
  return m;
}

std::string sign_message(const SecretKey& key, const std::string& msg, const std::string& what) {
  init_crypto();
  Pkey k(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, bytes(key.seed), key.seed.size()));
  MdCtx ctx(EVP_MD_CTX_new());
  std::string sig(kEd25519SignatureBytes, '\0');
  size_t n = sig.size();
  if (!k || !ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, k.get()) != 1 ||
      EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &n, bytes(msg), msg.size()) != 1 ||
      n != kEd25519SignatureBytes)
    throw io_error("OpenSSL could not sign " + what + " with the key " + key.name);
  return sig;
}

namespace {

// Signatures this process verified, by the SHA-256 of (public key,
// signature, message) -- fixed sizes for the first two, so the digest names
// exactly one triple. A keyed engine checks the same entry's signature on
// every hit, and a remote hit checks an entry at the remote door and then at
// the local one: each pays the ~0.15 ms of ed25519 once. Only successes are
// kept. Fork-safe (util/fork_safe.h).
class VerifiedSignatures {
 public:
  static VerifiedSignatures& global() {
    static VerifiedSignatures* v = new VerifiedSignatures;  // never destroyed: used until exit
    return *v;
  }
  bool contains(const std::string& digest) {
    std::lock_guard<util::ForkSafeMutex> g(mutex_);
    return digests_.count(digest) != 0;
  }
  void add(const std::string& digest) {
    std::lock_guard<util::ForkSafeMutex> g(mutex_);
    if (digests_.size() >= kCapacity) digests_.clear();
    digests_.insert(digest);
  }

 private:
  static constexpr size_t kCapacity = 4096;
  util::ForkSafeMutex mutex_;
  std::unordered_set<std::string> digests_;
};

}  // namespace

bool verify_message(const std::string& public_key, const std::string& signature, const std::string& msg) {
  if (signature.size() != kEd25519SignatureBytes || public_key.size() != kEd25519PublicKeyBytes) return false;
  util::Sha256 h;
  h.update(public_key);
  h.update(signature);
  h.update(msg);
  const std::string triple = h.hex_digest();
  if (VerifiedSignatures::global().contains(triple)) return true;
  init_crypto();
  Pkey k(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, bytes(public_key), public_key.size()));
  MdCtx ctx(EVP_MD_CTX_new());
  const bool ok = k && ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, k.get()) == 1 &&
                  EVP_DigestVerify(ctx.get(), bytes(signature), signature.size(), bytes(msg), msg.size()) == 1;
  if (ok) VerifiedSignatures::global().add(triple);
  return ok;
}

BlobSignature sign_blob_entry(const SecretKey& key, const BlobEntry& entry) {
  return BlobSignature{key.name, sign_message(key, signed_message(key.name, entry.key, blob_entry_digest(entry)), entry.dir)};
}

void prepare_signature_check() {
  init_crypto();
  // Any valid point will do: creating a key fetches the key manager, the
  // verify init the signature methods, and OpenSSL caches both.
  std::string pub = public_from_seed(std::string(kEd25519SeedBytes, '\1'));
  Pkey k(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, bytes(pub), pub.size()));
  MdCtx ctx(EVP_MD_CTX_new());
  if (k && ctx) EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, k.get());
}

std::shared_future<void> start_signature_setup() {
  return std::async(std::launch::async, [] {
           try {
             prepare_signature_check();
           } catch (const Error&) {
             // The check that needs OpenSSL reports what is wrong.
           }
         })
      .share();
}

std::optional<std::string> trusted_signer(const std::vector<PublicKey>& trusted, const BlobEntry& entry) {
  if (entry.signatures.empty() || trusted.empty()) return std::nullopt;
  init_crypto();
  const std::string digest = blob_entry_digest(entry);
  for (const auto& sig : entry.signatures) {
    if (sig.signature.size() != kEd25519SignatureBytes) continue;
    const std::string msg = signed_message(sig.signer, entry.key, digest);
    for (const auto& key : trusted)
      if (key.name == sig.signer && verify_message(key.key, sig.signature, msg)) return key.name;
  }
  return std::nullopt;
}

}  // namespace tvmffi_jit::cache
